"""Track B operators on volumes: registration, threshold segmentation and VISTA3D."""
