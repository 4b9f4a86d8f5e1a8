"""The MedCopilot Slicer module's library: the Slicer backend, the WebServer handler, headless batch runs."""
