#!/bin/bash
# Field matrix, guest side, as root: run by the base image's field-walk
# unit from the walk disk mounted at /mnt/field. Sets the machine up as the
# configuration says (/mnt/field/config), runs walk.sh as the configured
# user in a login session, and reports: everything under /mnt/field/out
# (read back by field-check.sh), the summary also on the serial line
# between FIELD-RESULT-BEGIN and FIELD-RESULT-END.
set -u
F=/mnt/field
OUT=$F/out
tty=/dev/ttyS0
say() { echo "$*" >"$tty"; }

# shellcheck source=/dev/null
. "$F/config" # CONFIG WALK_USER DAEMON NOUSERNS
say "FIELD-BEGIN $CONFIG"
rm -rf "$OUT"
mkdir -p "$OUT"
exec 2>>"$OUT/boot.log"
set -x

# The binaries as an installed release would put them.
for b in "$F"/bin/*; do install -m 0755 "$b" /usr/local/bin/; done

if [ "$NOUSERNS" = 1 ]; then
    # Stands for Ubuntu 24.04's AppArmor restriction: no unprivileged user
    # namespaces.
    sysctl -w user.max_user_namespaces=0 >>"$OUT/boot.log" 2>&1
fi

uid=$(id -u "$WALK_USER")
home=$(getent passwd "$WALK_USER" | cut -d: -f6)
# The user's systemd manager (lingering, or started now for root).
systemctl start "user@$uid.service" >>"$OUT/boot.log" 2>&1 || true
for _ in $(seq 1 120); do
    [ "$(systemctl is-active "user@$uid.service")" = active ] && break
    sleep 1
done
systemctl is-active "user@$uid.service" >"$OUT/user-manager.txt" 2>&1
chown -R "$WALK_USER:" "$OUT"

# The walk, as that user, in a PAM login session (pam_systemd gives it a
# session scope, as a terminal login would).
start=$(date +%s)
timeout 1500 runuser -l "$WALK_USER" -c "/bin/bash $F/guest/walk.sh $OUT $DAEMON" >"$OUT/walk.stdout" 2>&1
echo "exit=$? seconds=$(($(date +%s) - start))" >"$OUT/walk.exit"

# What only root sees.
{
    echo "config=$CONFIG"
    . /etc/os-release
    echo "distro=${NAME%% *} ${VERSION_ID:-?}"
    echo "kernel=$(uname -r)"
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo "cgroup=v2"; else echo "cgroup=v1"; fi
    echo "max_user_namespaces=$(cat /proc/sys/user/max_user_namespaces)"
    echo "walk_user=$WALK_USER home=$home daemon=$DAEMON"
} >"$OUT/facts"
{
    cat "$OUT/facts"
    cat "$OUT/summary" 2>/dev/null
} | grep '=' >"$OUT/result"
journalctl -b --no-pager >"$OUT/journal.txt" 2>&1 || true
set +x

say "FIELD-RESULT-BEGIN $CONFIG"
while IFS= read -r line; do say "$line"; done <"$OUT/result"
say "FIELD-RESULT-END $CONFIG"
sync
