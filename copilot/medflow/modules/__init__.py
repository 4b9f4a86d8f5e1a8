"""One file per MedFlow module; each declares its `BenchModule` with `register`."""
