#!/bin/sh
# The plugin's PreToolUse hook on Bash. With the plugin option precommit_review set to true,
# `gemini-mcp hook claude-code` reads the command Claude is about to run and, before a
# `git commit`, has Gemini review the pending changes; findings at or above precommit_fail_on
# (default high) stop the commit and Claude is shown the review. Off, or for any other command,
# it lets the command run at once. Claude Code passes the plugin's options as
# CLAUDE_PLUGIN_OPTION_<KEY>.
[ "${CLAUDE_PLUGIN_OPTION_PRECOMMIT_REVIEW:-false}" = "true" ] || exit 0
if [ -z "${GEMINI_API_KEY:-}" ] && [ -n "${CLAUDE_PLUGIN_OPTION_GEMINI_API_KEY:-}" ]; then
  GEMINI_API_KEY="$CLAUDE_PLUGIN_OPTION_GEMINI_API_KEY"; export GEMINI_API_KEY
fi
exec gemini-mcp hook claude-code --fail-on "${CLAUDE_PLUGIN_OPTION_PRECOMMIT_FAIL_ON:-high}"
