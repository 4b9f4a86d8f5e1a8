"""HTTP server for the handler registry and its client."""
