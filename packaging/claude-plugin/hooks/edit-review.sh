#!/bin/sh
# The plugin's PostToolUse hook on Edit, MultiEdit and Write. With the plugin option edit_review
# set to true, `gemini-mcp hook claude-code-edit` has Gemini review the lines Claude just changed
# (the flash model on the flex tier, at most once a minute per file, at most $0.05 a review) and
# hands what it found back to Claude as additional context. It never blocks an edit: off, or
# whatever happens, it exits 0. Claude Code passes the plugin's options as
# CLAUDE_PLUGIN_OPTION_<KEY>.
[ "${CLAUDE_PLUGIN_OPTION_EDIT_REVIEW:-false}" = "true" ] || exit 0
if [ -z "${GEMINI_API_KEY:-}" ] && [ -n "${CLAUDE_PLUGIN_OPTION_GEMINI_API_KEY:-}" ]; then
  GEMINI_API_KEY="$CLAUDE_PLUGIN_OPTION_GEMINI_API_KEY"; export GEMINI_API_KEY
fi
exec gemini-mcp hook claude-code-edit --timeout 150
