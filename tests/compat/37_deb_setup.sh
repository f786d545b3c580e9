#!/bin/sh
# tests/compat/37_deb.test.mjs runs this inside `unshare --mount --propagation
# private`: installs the package, sets up the unit's sandboxing as systemd
# would (the unit's settings come in U_* variables), then execs ExecStart (so
# the pid the test spawned is the server's).
#   sh 37_deb_setup.sh SCRATCH_DIR PACKAGE.deb LISTEN_ADDRESS
set -eu
T=$1; DEB=$2; LISTEN=$3
mount -t tmpfs -o mode=0700 browserd-deb-test "$T"
for d in usr etc var; do
    mkdir "$T/$d.up" "$T/$d.wk"
    mount -t overlay overlay -o "lowerdir=/$d,upperdir=$T/$d.up,workdir=$T/$d.wk" "/$d"
done
dpkg -i "$DEB" >&2
dpkg-query -W -f='installed: ${Package} ${Version} ${Status}\n' browserd >&2
# The operator's edit of the conffile.
sed -i -e "s|^BROWSERD_LISTEN=.*|BROWSERD_LISTEN=$LISTEN|" /etc/browserd/browserd.conf
echo BROWSERD_SPARES=0 >>/etc/browserd/browserd.conf
# RuntimeDirectory= (on the host's /run, as systemd would: it is also where
# every browserd on the host locks its sandbox uids).
[ -z "$U_RUNTIME" ] || install -d -m "$U_RUNTIME_MODE" "/run/$U_RUNTIME"
# PrivateTmp=: an empty /tmp of its own.
[ "$U_PRIVATE_TMP" != yes ] || mount -t tmpfs -o mode=1777 browserd-tmp /tmp
# ProtectHome=yes: /home, /root and /run/user empty and inaccessible.
if [ "$U_PROTECT_HOME" = yes ]; then
    for d in /home /root /run/user; do [ ! -d $d ] || mount -t tmpfs -o ro,mode=0000 browserd-nohome $d; done
fi
# ProtectSystem=strict: every file system read-only but the API file systems
# (/dev, /proc, /sys), /tmp when private, ReadWritePaths and RuntimeDirectory.
if [ "$U_PROTECT_SYSTEM" = strict ]; then
    keep=""
    for p in $U_RW_PATHS ${U_RUNTIME:+/run/$U_RUNTIME}; do
        case $p in /sys/*|/proc/*|/dev/*) continue ;; esac
        mount --bind "$p" "$p"
        keep="$keep $p"
    done
    awk '{print $5}' /proc/self/mountinfo | sort -u | while read -r mp; do
        case $mp in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue ;; esac
        [ "$U_PRIVATE_TMP" != yes ] || case $mp in /tmp|/tmp/*) continue ;; esac
        skip=""
        for k in $keep; do [ "$mp" != "$k" ] || skip=1; done
        [ -n "$skip" ] || mount -o remount,bind,ro "$mp" 2>/dev/null || true
    done
    ! touch /usr/.browserd-rw-probe 2>/dev/null || { echo "ProtectSystem: /usr stayed writable" >&2; exit 1; }
fi
# LimitNOFILE=: where this test may not raise the hard limit (no
# CAP_SYS_RESOURCE), as far as it goes.
ulimit -n "$U_NOFILE" 2>/dev/null || {
    echo "LimitNOFILE=$U_NOFILE: this host allows $(ulimit -Hn)" >&2
    ulimit -n "$(ulimit -Hn)"
}
cd "$U_WORKDIR"
umask "$U_UMASK"
nnp=""
[ "$U_NNP" != yes ] || nnp="setpriv --no-new-privs --"
# The unit's environment: systemd's PATH for system services, then the EnvironmentFile.
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin \
    sh -c 'set -a; . "$1"; set +a; shift; exec "$@"' sh "$U_ENVFILE" \
    $nnp $U_EXEC
