"""The volume engine: images in RAS, their loading from DICOM and files, display, reslicing and the embedded viewer."""
