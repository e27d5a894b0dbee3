#!/bin/sh
# Field matrix: the one-time setup of a base image, run by mmdebstrap as its
# customize hook with the root file system's directory as $1. Part of the
# image's cache key (scripts/field-check.sh hashes this file): change it and
# the images are built again.
#
# The image boots straight into field-walk.service, which mounts the second
# disk (/dev/vdb, made per run by field-check.sh) and runs guest/boot.sh
# from it, then powers the machine off. Nothing of Forge lives in the image.
set -eu
root=$1

# A normal user with a home of their own and a lingering systemd user
# manager (what `loginctl enable-linger dev` writes).
chroot "$root" useradd --create-home --shell /bin/bash dev
mkdir -p "$root/var/lib/systemd/linger"
: >"$root/var/lib/systemd/linger/dev"

echo field >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tfield\n::1\tlocalhost ip6-localhost\n' >"$root/etc/hosts"
printf '/dev/vda\t/\text4\trw,errors=remount-ro\t0\t0\n' >"$root/etc/fstab"

# The runner: mount the walk disk, hand over, power off whatever happened.
cat >"$root/usr/local/sbin/field-run" <<'EOF'
#!/bin/sh
# Runs the field walk from the second disk, then powers off.
mkdir -p /mnt/field
if mount -o rw /dev/vdb /mnt/field && [ -f /mnt/field/guest/boot.sh ]; then
    /bin/bash /mnt/field/guest/boot.sh
else
    echo "FIELD-ERROR no walk disk on /dev/vdb" >/dev/ttyS0
fi
sync
umount /mnt/field 2>/dev/null || true
systemctl --no-block poweroff
EOF
chmod 0755 "$root/usr/local/sbin/field-run"

cat >"$root/etc/systemd/system/field-walk.service" <<'EOF'
[Unit]
Description=Forge field walk (from /dev/vdb)
Wants=systemd-logind.service dbus.service
After=systemd-user-sessions.service systemd-logind.service dbus.service basic.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/field-run
TimeoutStartSec=0
StandardOutput=journal
StandardError=journal

[Install]
WantedBy=multi-user.target
EOF
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/field-walk.service "$root/etc/systemd/system/multi-user.target.wants/field-walk.service"

# Quiet, quick boots: no login prompt on the serial line (it carries the
# results), no periodic jobs competing for the emulated CPUs.
for unit in serial-getty@ttyS0.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer \
    man-db.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer dpkg-db-backup.timer; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# Booting with the kernel given on QEMU's command line: no boot loader.
rm -rf "$root/var/cache/apt/archives"/*.deb
