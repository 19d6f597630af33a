# Sourced by scripts/demo, scripts/test, scripts/bench and scripts/docs: make sure .venv exists and holds
# dpfast with the given extras, reinstalling only when pyproject.toml has changed.
# Usage: ensure_venv SCRIPT_NAME EXTRAS      (EXTRAS: '.', '.[test]' or '.[docs]')
# Python: ${PYTHON:-python3}, 3.10 or newer.

ensure_venv() {
    local script="$1" extras="$2"
    local python="${PYTHON:-python3}" venv=.venv
    local tag="${extras//[^a-z]/}"
    local stamp="$venv/.dpfast-installed-${tag:-base}"
    if [[ ! -x "$venv/bin/python" ]]; then
        if ! command -v "$python" >/dev/null 2>&1; then
            echo "$script: '$python' not found; install Python 3.10+ or set PYTHON=/path/to/python" >&2
            exit 2
        fi
        if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
            echo "$script: dpfast needs Python 3.10+, but $python is $("$python" -V 2>&1); set PYTHON=/path/to/python3.10+" >&2
            exit 2
        fi
        echo "$script: creating $venv with $("$python" -V 2>&1)" >&2
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
    fi
    local hash
    hash="$("$venv/bin/python" -c 'import hashlib; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())')"
    # An install with the test extras also serves the demo (extras '.'), not the docs.
    local served=""
    if [[ "$extras" == "." ]]; then
        served="$(cat "$venv/.dpfast-installed-test" 2>/dev/null || true)"  # set -e: no stamp is no error
    fi
    if [[ "$(cat "$stamp" 2>/dev/null)" != "$hash" && "$served" != "$hash" ]]; then
        echo "$script: installing dpfast (pip install -e '$extras') into $venv" >&2
        "$venv/bin/python" -m pip install --quiet --quiet -e "$extras"
        echo "$hash" > "$stamp"
    fi
}

# Compile and cache the kernels of every release (dpfast warm-up) unless this .venv has done
# it for the same kernels, Numba and Python (the stamp holds their hash), so that the first
# release of each method starts at once. A release that still compiles says so. The cache
# is Numba's default (beside dpfast's code) or NUMBA_CACHE_DIR, each with its own stamp
# (named by the folder's checksum); a NUMBA_CACHE_DIR that is gone is compiled again.
# Usage: ensure_warmed_up SCRIPT_NAME     (after ensure_venv)
ensure_warmed_up() {
    local script="$1" venv=.venv
    local stamp="$venv/.dpfast-warmed-up" key
    if [[ -n "${NUMBA_CACHE_DIR:-}" ]]; then
        stamp="$stamp-$(printf '%s' "$NUMBA_CACHE_DIR" | cksum | cut -d' ' -f1)"
        [[ -d "$NUMBA_CACHE_DIR" ]] || rm -f "$stamp"
    fi
    key="$("$venv/bin/python" - <<'PY'
import hashlib, importlib.metadata, pathlib, sys
digest = hashlib.sha256(sys.version.encode())
digest.update(importlib.metadata.version("numba").encode())
for path in sorted(pathlib.Path("dpfast").glob("_kernels/*.py")) + [pathlib.Path("dpfast/_jit.py")]:
    digest.update(path.as_posix().encode() + b"\0" + path.read_bytes())
print(digest.hexdigest())
PY
)"
    if [[ "$(cat "$stamp" 2>/dev/null)" != "$key" ]]; then
        echo "$script: compiling dpfast's kernels once with dpfast warm-up (a few minutes)" >&2
        rm -f "$stamp"
        "$venv/bin/dpfast" warm-up
        echo "$key" > "$stamp"
    fi
}
