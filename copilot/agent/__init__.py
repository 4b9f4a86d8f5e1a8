"""Agents and offline policies that run episodes through a session's handlers."""
