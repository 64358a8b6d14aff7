#!/usr/bin/env bash
# Checks the man pages in docs/man/: each *.scd builds with scdoc(1) and renders with
# `man --warnings` without a word on stderr; meith.1 has every option `meith --help` prints and
# every command of its Commands list, meithd.8 every option of `meithd --help`; both have the
# usual sections.
#
# usage: tests/packaging/man_test.sh SOURCE_DIR BIN_DIR
#   SOURCE_DIR  the repository
#   BIN_DIR     the folder with the built meith and meithd
# Exit status: 0 all good, 1 a check failed, 77 scdoc or man is not installed (skipped).
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 SOURCE_DIR BIN_DIR" >&2
    exit 2
fi
src=$1
bin=$2
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

for tool in scdoc man; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "SKIP: $tool is not installed" >&2
        exit 77
    fi
done
for b in meith meithd; do
    [[ -x $bin/$b ]] || { echo "FAIL: $bin/$b is missing or not executable" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pages=()
for scd in "$src"/docs/man/*.scd; do
    [[ -e $scd ]] || { echo "FAIL: no docs/man/*.scd in $src" >&2; exit 1; }
    page=$(basename "$scd" .scd) # meith.1
    pages+=("$page")
    if ! scdoc <"$scd" >"$tmp/$page" 2>"$tmp/$page.scdoc.err" || [[ -s $tmp/$page.scdoc.err ]]; then
        fail "scdoc $scd: $(cat "$tmp/$page.scdoc.err")"
        continue
    fi
    if ! MANWIDTH=80 man --warnings -l "$tmp/$page" >"$tmp/$page.txt" 2>"$tmp/$page.man.err"; then
        fail "man -l $page failed: $(cat "$tmp/$page.man.err")"
    elif [[ -s $tmp/$page.man.err ]]; then
        fail "man --warnings -l $page warns:"$'\n'"$(cat "$tmp/$page.man.err")"
    fi
    [[ -s $tmp/$page.txt ]] || fail "$page renders to nothing"
    # The page's text without roff's font escapes, for the checks below (the rendered text
    # hyphenates long options at line ends, so it is not searched).
    sed -e 's/\\f[BIRP]//g' -e 's/\\&//g' -e 's/\\-/-/g' -e 's/\\(aq/'"'"'/g' \
        "$tmp/$page" >"$tmp/$page.plain"
done
for want in meith.1 meithd.8; do
    [[ " ${pages[*]} " == *" $want "* ]] || fail "docs/man/$want.scd is missing"
done

# has_word PAGE WORD: WORD (an option) appears in PAGE, not as part of a longer option.
has_word() {
    grep -qE -- "(^|[^[:alnum:]-])$2([^[:alnum:]-]|$)" "$tmp/$1.plain"
}

# Sections.
check_sections() {
    local page=$1 s
    shift
    for s in NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT FILES "EXIT STATUS" EXAMPLES \
        "SEE ALSO" "$@"; do
        grep -qxF ".SH $s" "$tmp/$page" || fail "$page has no $s section"
    done
}

# check_options PAGE HELP_FILE: every --long option (and -h) in the help is in the page.
check_options() {
    local page=$1 help=$2 opt n=0
    for opt in $(grep -oE -- '(^|[^[:alnum:]-])--[a-z][a-z0-9-]*' "$help" |
        sed 's/^[^-]*//' | sort -u) -h; do
        n=$((n + 1))
        has_word "$page" "$opt" || fail "$page does not mention $opt (from its --help)"
    done
    [[ $n -gt 5 ]] || fail "found only $n options in $help: is its --help still the same?"
}

if [[ -f $tmp/meith.1.plain ]]; then
    check_sections meith.1 COMMANDS
    "$bin/meith" --help >"$tmp/meith.help"
    check_options meith.1 "$tmp/meith.help"

    # Commands: the lines of the Commands list, "  WORD [WORD] ARGS" up to a gap of two
    # spaces before the summary; a second word in lower case is a subcommand (sources
    # restart). Each must be a command heading in COMMANDS.
    sed -n '/^Commands:/,/^$/p' "$tmp/meith.help" | grep -E '^  [a-z]' |
        sed -e 's/^  //' -e 's/  .*//' |
        awk '{ if ($2 ~ /^[a-z]+$/) print $1 " " $2; else print $1 }' >"$tmp/commands"
    [[ $(wc -l <"$tmp/commands") -ge 9 ]] ||
        fail "found only $(wc -l <"$tmp/commands") commands in meith --help"
    sed -n '/^\.SH COMMANDS$/,/^\.SH /p' "$tmp/meith.1.plain" >"$tmp/commands.section"
    while IFS= read -r cmd; do
        grep -qE -- "^$cmd( |$)" "$tmp/commands.section" ||
            fail "meith.1 has no COMMANDS entry for '$cmd' (from meith --help)"
    done <"$tmp/commands"
fi

if [[ -f $tmp/meithd.8.plain ]]; then
    check_sections meithd.8 SIGNALS
    "$bin/meithd" --help >"$tmp/meithd.help"
    check_options meithd.8 "$tmp/meithd.help"
fi

if [[ $failures -gt 0 ]]; then
    echo "man_test: $failures check(s) failed" >&2
    exit 1
fi
echo "man_test: ${pages[*]} build, render without warnings and cover --help"
