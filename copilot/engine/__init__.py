"""Embedded viewer engines that obey the same contract as 3D Slicer and QuPath."""
