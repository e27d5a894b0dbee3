#!/bin/sh
# Cargo runs this as RUSTC_WRAPPER for scripts/pgo-build.sh: "$1" is rustc.
# It links forgectl alone with the C library built in (crt-static): a send is
# a short process, and mapping libc, libm, libgcc_s and the dynamic loader
# costs it about 1 MiB of its memory. Cargo cannot set a target feature for
# one binary, and setting it for the whole build would also make the proc
# macros static, which cannot work. forged stays dynamic: it resolves
# provider host names, which a static glibc does only through the system's
# own NSS libraries.
rustc="$1"
shift
case " $* " in
*" --crate-name forgectl "*"--crate-type bin"*) exec "$rustc" "$@" -Ctarget-feature=+crt-static ;;
esac
exec "$rustc" "$@"
