"""A toy MedCopilot plug-in: greyscale pictures of bright squares, a viewer kind that shows them, a benchmark module
that asks how many squares there are, an adapter for a folder of such pictures with a labels table, a zoom-only
Track B operation set and a picture program the copilot attaches to as a host."""
