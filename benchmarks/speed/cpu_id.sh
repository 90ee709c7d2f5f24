# Sourced by the sittings: `cpu_id` prints what names this CPU in machine.txt. A VM's
# "model name" can be a bare "AMD EPYC" for several generations, so the family, model and
# stepping numbers (26 = Zen 5, 25 = Zen 3/4) and the vector extensions are printed too.
cpu_id() {
  grep -m1 'model name' /proc/cpuinfo
  awk -F'\t*: ' '/^(cpu family|model|stepping)[ \t]*:/ && !seen[$1]++ { printf "%s %s  ", $1, $2 }
    END { print "" }' /proc/cpuinfo
  nproc
  grep -m1 -o -w -E 'avx2|avx512[a-z0-9_]*|amx_[a-z0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
}
