"""The one seam between MedCopilot and model services: policy specs, three wire formats, deadlines, usage and cost.

Conversations are kept in the chat-completions message shape (roles system/user/assistant/tool, text and
`image_url` data-URL parts, `tool_calls`); each wire module translates that shape to its provider's native API
(docs/models.md lists the rules). No module outside this package imports a provider SDK.
"""
