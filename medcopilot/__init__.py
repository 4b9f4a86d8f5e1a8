"""The `medcopilot` namespace of the distribution's Inspect AI tasks (`inspect eval medcopilot/medflow`); the
product itself is the `copilot` package."""
