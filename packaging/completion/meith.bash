# bash completion for meith(1), the meith tool-registry client.
#
# Install as ~/.local/share/bash-completion/completions/meith (bash-completion loads it on
# first use), or source it from ~/.bashrc. Needs nothing but bash 4+, sed and meith itself:
# tool and source names come from `meith tools --no-autostart` (never starting a
# daemon, silent and empty when none runs). Checked by tests/packaging/completion_test.sh.

# Options that take a value in the next word (or after '=').
_meith_value_opts=" --socket --home --caller --timeout-ms --since --tool --event --limit --file --manager --format --text --tag --client --session --uses --expires "
_meith_global_opts="--socket --home --caller --no-autostart --help"
_meith_commands="status tools call preview sources login secret import connect clients reload stop restart policy approve grant grants revoke mcp service audit init help version"
_meith_audit_events="tool_call tool_call_rejected list_tools cancel_tool_call connection_open
connection_close connection_rejected frame_refused source_start source_exit source_restart
source_failed source_restart_requested source_learning_started source_learning_stopped source_waking source_idle_stopped source_tools_changed tool_preview mcp_request client_request mcp_handoff mcp_handoff_refused approval_request
approval_decision approver_connected approver_rejected grant_created grant_used grant_revoked
grant_expired daemon_start daemon_stop config_reload audit_repaired egress egress_rule_added
tool_capabilities_changed tool_definition_changed tool_definition_accepted all"

# Prints the names of the daemon's tools ($2 = tools) or sources ($2 = sources), one a line,
# asking the meith binary $1 with the connection options that follow. Prints nothing, quickly,
# when no daemon answers.
_meith_names() {
    local meith=$1 what=$2 out
    shift 2
    command -v -- "$meith" >/dev/null 2>&1 || return 0
    if command -v timeout >/dev/null 2>&1; then
        out=$(MEITH_NO_AUTOSTART=1 timeout 3 "$meith" "$what" --no-autostart "$@" \
            2>/dev/null </dev/null) || return 0
    else
        out=$(MEITH_NO_AUTOSTART=1 "$meith" "$what" --no-autostart "$@" \
            2>/dev/null </dev/null) || return 0
    fi
    # The table: a header line, then one row per tool or source whose first column is its
    # name (names hold no spaces); "no tools" / "no sources" when there are none.
    [[ $out == NAME* ]] || return 0
    printf '%s\n' "$out" | sed -n '2,$s/^\([^ ]*\).*/\1/p'
    return 0
}

# COMPREPLY = the words of $1 that start with $2.
_meith_reply() {
    mapfile -t COMPREPLY < <(compgen -W "$1" -- "$2")
    return 0
}

_meith() {
    COMPREPLY=()
    local cword=$COMP_CWORD
    local cur=${COMP_WORDS[cword]-} prev="" opt=""
    if [[ $cword -gt 0 ]]; then prev=${COMP_WORDS[cword-1]-}; fi

    # The words before the cursor: positionals (command, subcommand, arguments) and the
    # --home/--socket given, which the daemon queries below must use too.
    local -a pos=() conn=()
    local i=1 w v dashdash=0
    while [[ $i -lt $cword ]]; do
        w=${COMP_WORDS[i]}
        if [[ $dashdash == 1 ]]; then
            pos+=("$w")
        elif [[ $w == -- ]]; then
            dashdash=1
        elif [[ $w == --*=* ]]; then
            case ${w%%=*} in --home | --socket) conn+=("${w%%=*}" "${w#*=}") ;; esac
        elif [[ $w == --* && $_meith_value_opts == *" $w "* ]]; then
            if [[ ${COMP_WORDS[i+1]-} == = ]]; then
                v=${COMP_WORDS[i+2]-}
                i=$((i + 2))
            else
                v=${COMP_WORDS[i+1]-}
                i=$((i + 1))
            fi
            case $w in --home | --socket) conn+=("$w" "$v") ;; esac
        elif [[ $w != -* ]]; then
            pos+=("$w")
        fi
        i=$((i + 1))
    done
    local j
    for ((j = 1; j < ${#conn[@]}; j += 2)); do
        conn[j]=${conn[j]/#\~/$HOME}
    done

    local meith=${COMP_WORDS[0]-meith}
    meith=${meith/#\~/$HOME}

    # The value of an option: "--opt VALUE", "--opt=VALUE" (COMP_WORDBREAKS splits at '=').
    if [[ $dashdash == 0 ]]; then
        if [[ $cur == = && $prev == --* ]]; then
            opt=$prev
            cur=""
        elif [[ $prev == = && $cword -ge 2 ]]; then
            opt=${COMP_WORDS[cword-2]-}
        elif [[ $_meith_value_opts == *" $prev "* ]]; then
            opt=$prev
        fi
    fi
    case $opt in
    --home)
        compopt -o filenames 2>/dev/null || :
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        return 0
        ;;
    --socket | --file | --text)
        compopt -o filenames 2>/dev/null || :
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return 0
        ;;
    --caller)
        _meith_reply "cli plugin" "$cur"
        return 0
        ;;
    --client)
        # import: a client whose config it reads; elsewhere a client profile's name.
        if [[ ${pos[0]-} == import ]]; then
            _meith_reply "claude-code claude-desktop cursor vscode codex gemini windsurf" "$cur"
        fi
        return 0
        ;;
    --manager)
        _meith_reply "systemd launchd" "$cur"
        return 0
        ;;
    --format)
        _meith_reply "meith openai openai.responses anthropic mcp" "$cur"
        return 0
        ;;
    --event)
        _meith_reply "$_meith_audit_events" "$cur"
        return 0
        ;;
    --tool)
        _meith_reply "$(_meith_names "$meith" tools "${conn[@]}")" "$cur"
        return 0
        ;;
    --timeout-ms | --since | --limit | --tag | --session | --uses | --expires)
        return 0 # a number or a duration: nothing to offer
        ;;
    esac

    local cmd=${pos[0]-} sub=${pos[1]-} opts="" args=""
    local n=${#pos[@]}
    case $cmd in
    "")
        if [[ $cur == -* ]]; then
            _meith_reply "$_meith_global_opts --version" "$cur"
        else
            _meith_reply "$_meith_commands" "$cur"
        fi
        return 0
        ;;
    status) opts="--json" ;;
    tools)
        if [[ $sub == accept ]]; then
            opts=""
            if [[ $n == 2 ]]; then args=tools; fi
        else
            opts="--json --format --tag --search --client"
            if [[ $n == 1 ]]; then args=tools; fi
        fi
        ;;
    init) opts="--force" ;;
    help)
        if [[ $n == 1 ]]; then args=$_meith_commands; fi
        ;;
    version) ;;
    reload) opts="--json" ;;
    stop | restart) opts="--timeout-ms" ;;
    call)
        opts="--timeout-ms --raw --model --display --text --json --client"
        if [[ $n == 1 ]]; then args=tools; fi
        ;;
    preview)
        opts="--text --json --client"
        if [[ $n == 1 ]]; then args=tools; fi
        ;;
    sources)
        if [[ $sub == restart ]]; then
            opts="--timeout-ms"
            if [[ $n == 2 ]]; then args=sources; fi
        elif [[ $sub == update ]]; then
            opts="--dry-run --yes"
            if [[ $n == 2 ]]; then args=sources; fi
        elif [[ $sub == learn ]]; then
            opts="--start --stop --write --json"
            if [[ $n == 2 ]]; then args=sources; fi
        else
            opts="--json"
            if [[ $n == 1 ]]; then args="restart update learn"; fi
        fi
        ;;
    login)
        opts="--timeout-ms"
        if [[ $n == 1 ]]; then args=sources; fi
        ;;
    secret)
        opts=""
        if [[ $n == 1 ]]; then args="set list rm"; fi
        ;;
    import)
        opts="--client --dry-run --yes"
        ;;
    connect)
        opts="--client --dry-run --yes --undo"
        if [[ $n == 1 ]]; then args="claude-code claude-desktop cursor vscode codex gemini windsurf"; fi
        ;;
    clients) opts="--json" ;;
    policy)
        if [[ $sub == check ]]; then
            opts="--json --client"
            if [[ $n == 2 ]]; then args=tools; fi
        elif [[ $n == 1 ]]; then
            args=check
        fi
        ;;
    approve) ;;
    grant)
        opts="--tool --caller --session --uses --expires --json"
        if [[ $n == 1 ]]; then
            # A comma-separated list: complete the capability after the last comma.
            local prefix="" last=$cur
            if [[ $cur == *,* ]]; then prefix=${cur%,*},; last=${cur##*,}; fi
            if [[ $cur != -* ]]; then
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "read-only writes-files controls-browser starts-process accesses-network destructive unknown" -- "$last")
                return 0
            fi
        fi
        ;;
    grants) opts="--json" ;;
    revoke) ;;
    mcp) opts="--all --search --client" ;;
    service)
        case $sub in
        install) opts="--socket-activated --dry-run --manager" ;;
        uninstall | status) opts="--dry-run --manager" ;;
        *) if [[ $n == 1 ]]; then args="install uninstall status"; fi ;;
        esac
        ;;
    audit) opts="--since --tool --denied --event --limit --json --file --follow" ;;
    *) return 0 ;;
    esac

    if [[ $cur == -* ]]; then
        _meith_reply "$opts $_meith_global_opts" "$cur"
    elif [[ $args == tools || $args == sources ]]; then
        _meith_reply "$(_meith_names "$meith" "$args" "${conn[@]}")" "$cur"
    elif [[ -n $args ]]; then
        _meith_reply "$args" "$cur"
    fi
    return 0
}

complete -F _meith meith
