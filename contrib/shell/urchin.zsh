# Urchin for zsh: record each command with its exit code, cwd and duration.
# Source this from ~/.zshrc (`urchin install-hooks shell` does it). The recording runs in the
# background and is disowned, so the prompt never waits; a command typed with a leading space
# is not recorded. URCHIN_BIN overrides the command; `urchin install-hooks shell` writes its
# absolute path below, so the recording never looks up PATH.
[[ -o interactive ]] || return 0
(( ${+__urchin_loaded} )) && return 0
typeset -ga __urchin_bin
if [[ -n ${URCHIN_BIN:-} ]]; then __urchin_bin=("$URCHIN_BIN"); else __urchin_bin=("$(whence -p urchin)"); fi
[[ -n ${__urchin_bin[*]} ]] || return 0
typeset -g __urchin_loaded=1 __urchin_cmd="" __urchin_start="" __urchin_epoch=""
zmodload zsh/datetime 2>/dev/null
autoload -Uz add-zsh-hook

__urchin_preexec() {
  __urchin_cmd=$1
  __urchin_start=$EPOCHREALTIME
  __urchin_epoch=$EPOCHSECONDS
}

__urchin_precmd() {
  local code=$?
  [[ -z $__urchin_cmd ]] && return
  local cmd=$__urchin_cmd
  __urchin_cmd=""
  [[ $cmd == ' '* ]] && return
  local dur=$(( (EPOCHREALTIME - __urchin_start) * 1000 ))
  ( print -rn -- "$cmd" | command "${__urchin_bin[@]}" hook shell --shell zsh --exit-code "$code" \
      --cwd "$PWD" --started "$__urchin_epoch" --duration-ms "${dur%.*}" --session "$$" >/dev/null 2>&1 ) &!
}

add-zsh-hook preexec __urchin_preexec
add-zsh-hook precmd __urchin_precmd
