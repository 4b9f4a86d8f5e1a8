"""Study mode: the copilot on a clinician's own study (a DICOM series, a NIfTI/NRRD/MHA volume, a slide or a case
pack): a conversation with follow-ups, every step audited in a local trace, nothing identifying sent to the model."""
