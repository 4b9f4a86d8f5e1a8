"""A toy MedCopilot plug-in: greyscale pictures of bright squares, a viewer kind that shows them, a benchmark module
that asks how many squares there are and an adapter for a folder of such pictures with a labels table."""
