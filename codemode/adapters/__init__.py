"""Adapters from codemode sessions to the agent SDKs people use (docs/integrations.md).

Each adapter module imports its SDK only when it needs its types at run time, so importing
`codemode.adapters` costs nothing:

    codemode.adapters.openai        Chat Completions and Responses tool definitions; tool
                                    calls -> tool messages / function_call_output items
    codemode.adapters.anthropic     Messages API tool definitions; tool_use -> tool_result
    codemode.adapters.pydantic_ai   `CodeModeToolset`, a pydantic-ai toolset whose
                                    `run_code` runs through the session (needs the
                                    `pydantic-ai` extra)

Every tool call an adapter hands over runs through `Session.call_batch`, so policies,
approvals and the session log apply exactly as for any other caller.
"""

__all__: list[str] = []
