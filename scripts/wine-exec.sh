#!/usr/bin/env bash
# wine-exec.sh: runs a Windows program under Debian's wine, for
# `GOOS=windows go test -exec scripts/wine-exec.sh` (make wine-unit).
#
# Its wine prefix (WINEPREFIX, default ~/.cache/mcpsidecar-wine) is made
# once: `wineboot -i`, then a ProcessPrng shim built with mingw into
# system32. Go 1.24 and later load ProcessPrng from bcryptprimitives.dll at
# start; wine 8.0 (Debian 12) has no such DLL, and a Go binary stops with
# "bcryptprimitives.dll not found" (/work/shared/reference/libraries.md
# section 11). The shim forwards to RtlGenRandom (advapi32's SystemFunction036).
set -euo pipefail
export WINEPREFIX="${WINEPREFIX:-$HOME/.cache/mcpsidecar-wine}"
export WINEDEBUG="${WINEDEBUG:--all}"
export WINEARCH=win64
wine=$(command -v wine64 || command -v wine || true)
[[ -x /usr/lib/wine/wine64 ]] && wine=/usr/lib/wine/wine64
if [[ -z "$wine" ]]; then
  echo "wine-exec: wine is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
sys32="$WINEPREFIX/drive_c/windows/system32"
shim="$sys32/bcryptprimitives.dll"
if [[ ! -s "$shim" ]]; then
  (
    flock 9
    if [[ ! -s "$shim" ]]; then
      mkdir -p "$WINEPREFIX"
      "$wine" wineboot -i >/dev/null 2>&1 || true
      wineserver -w 2>/dev/null || true
      [[ -d "$sys32" ]] || { echo "wine-exec: wineboot made no prefix at $WINEPREFIX" >&2; exit 1; }
      src=$(mktemp -d)
      cat >"$src/shim.c" <<'C'
#include <windows.h>
#include <ntsecapi.h>
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE p, SIZE_T n) { return RtlGenRandom(p, (ULONG)n); }
C
      printf 'LIBRARY bcryptprimitives.dll\nEXPORTS\nProcessPrng\n' >"$src/shim.def"
      x86_64-w64-mingw32-gcc -shared -O2 -o "$src/bcryptprimitives.dll" "$src/shim.c" "$src/shim.def" -ladvapi32
      cp "$src/bcryptprimitives.dll" "$shim.tmp" && mv "$shim.tmp" "$shim"
      rm -rf "$src"
    fi
  ) 9>"$WINEPREFIX.lock"
fi
exec "$wine" "$@"
