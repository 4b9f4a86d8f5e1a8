"""Process measures of recorded episodes: what each trace showed and did (coverage, exploration, workflow faults,
failure labels, the seven dimensions, the workflow audit, reflection), across repeats (agreement) and under
injected faults (perturbation), keyed by run configuration."""
