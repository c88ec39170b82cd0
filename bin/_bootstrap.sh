# Sourced by bin/mmsim and bin/test: make sure ./.venv exists and holds this
# checkout installed in editable mode with its [dev] extras, then leave
# MMSIM_PY pointing at its python. Only python3 (>= 3.11, with venv/ensurepip)
# and access to the package registry are needed. All chatter goes to stderr so
# that `./bin/mmsim ... --json` prints nothing but JSON on stdout.
# shellcheck shell=bash

MMSIM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMSIM_VENV=${MMSIM_VENV:-$MMSIM_ROOT/.venv}
MMSIM_PY=$MMSIM_VENV/bin/python
_stamp=$MMSIM_VENV/.mmsim-installed

_mmsim_bootstrap() {
    local py=${PYTHON:-python3}
    if [ ! -x "$MMSIM_PY" ]; then
        if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "mmsim: error: need $py >= 3.11 (found: $("$py" --version 2>&1))" >&2
            return 1
        fi
        echo "mmsim: creating $MMSIM_VENV" >&2
        if ! "$py" -m venv "$MMSIM_VENV" >&2; then
            echo "mmsim: error: '$py -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2
            rm -rf "$MMSIM_VENV"
            return 1
        fi
        rm -f "$_stamp"
    fi
    # Re-install when the venv is new or pyproject.toml changed since the last install.
    if [ ! -f "$_stamp" ] || [ "$MMSIM_ROOT/pyproject.toml" -nt "$_stamp" ]; then
        echo "mmsim: installing mmsim and its dependencies into $MMSIM_VENV" >&2
        # pip's own progress (one line per package, download bars on a terminal), on stderr.
        "$MMSIM_PY" -m pip install --disable-pip-version-check --progress-bar on -e "$MMSIM_ROOT[dev]" >&2 \
            || return 1
        # The optional compiled core (src/mmsim/corebuild.py: ~1 min with mypyc; identical results, less host
        # time). Never fails the install: without a compiler everything runs as pure Python.
        "$MMSIM_PY" -m mmsim.corebuild --bootstrap >&2 || true
        touch "$_stamp"
    fi
}

if command -v flock >/dev/null 2>&1; then
    # Two scripts started at once must not both pip-install into one venv.
    exec 9>"$MMSIM_VENV.lock"
    flock 9
    _mmsim_bootstrap || exit 1
    flock -u 9
    exec 9>&-
else
    _mmsim_bootstrap || exit 1
fi
