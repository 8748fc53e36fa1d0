# Urchin for bash: record each command with its exit code, cwd and duration.
# Source this from ~/.bashrc (`urchin install-hooks shell` does it). The recording runs in the
# background, so the prompt never waits; commands that bash keeps out of history (a leading
# space with HISTCONTROL=ignorespace) are not recorded either. URCHIN_BIN overrides the command;
# `urchin install-hooks shell` writes its absolute path below, so the recording never looks up PATH.
[[ $- == *i* ]] || return 0
[[ -n ${__urchin_loaded:-} ]] && return 0
if [[ -n ${URCHIN_BIN:-} ]]; then __urchin_bin=("$URCHIN_BIN"); else __urchin_bin=("$(type -P urchin)"); fi
[[ -n ${__urchin_bin[*]} ]] || return 0
__urchin_loaded=1
__urchin_last=$(builtin history 1 | { read -r n _; printf '%s' "${n%\*}"; })   # not the line that sourced us
__urchin_armed=1
__urchin_start=""

__urchin_now_us() {
  if [[ -n ${EPOCHREALTIME:-} ]]; then printf '%s' "${EPOCHREALTIME/[.,]/}"; else printf '%s000000' "$(date +%s)"; fi
}

__urchin_preexec() {
  if [[ -n $__urchin_armed ]]; then __urchin_armed=""; __urchin_start=$(__urchin_now_us); fi
}

__urchin_record() {
  local code=$? entry num stamp cmd dur=""
  entry=$(HISTTIMEFORMAT='%s ' builtin history 1)
  [[ $entry =~ ^[[:space:]]*([0-9]+)[*[:space:]]+([0-9]+)[[:space:]](.*)$ ]] || return $code
  num=${BASH_REMATCH[1]} stamp=${BASH_REMATCH[2]} cmd=${BASH_REMATCH[3]}
  if [[ $num != "$__urchin_last" && -n $__urchin_last$__urchin_start ]]; then
    [[ -n $__urchin_start ]] && dur=$(( ($(__urchin_now_us) - __urchin_start) / 1000 ))
    ( printf '%s' "$cmd" | command "${__urchin_bin[@]}" hook shell --shell bash --exit-code "$code" \
        --cwd "$PWD" --started "$stamp" --duration-ms "$dur" --session "$$" >/dev/null 2>&1 & )
  fi
  __urchin_last=$num
  return $code
}

__urchin_ready() { __urchin_armed=1; __urchin_start=""; }

if declare -p preexec_functions >/dev/null 2>&1; then
  preexec_functions+=(__urchin_preexec)          # bash-preexec is loaded: use it
elif [[ -z $(trap -p DEBUG) ]]; then
  trap '__urchin_preexec' DEBUG
fi
if [[ $(declare -p PROMPT_COMMAND 2>/dev/null) == "declare -a"* ]]; then
  PROMPT_COMMAND=(__urchin_record "${PROMPT_COMMAND[@]}" __urchin_ready)
else
  PROMPT_COMMAND="__urchin_record${PROMPT_COMMAND:+; $PROMPT_COMMAND}; __urchin_ready"
fi
