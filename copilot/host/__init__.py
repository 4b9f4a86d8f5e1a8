"""The copilot inside a clinician's own viewer (3D Slicer, QuPath): a session on what is already open, a
conversation with approve-each-action, and evidence written back into the host. Qt-free; the hosts' widgets
bind to it."""
