"""The desktop app (PySide6): thin widgets over `copilot.panel.PanelModel`."""
