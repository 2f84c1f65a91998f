#!/usr/bin/env bash
# The man pages cannot drift from doc/ or from the code: embgw.cfg(5) is
# generated from doc/configuration.md and the options of embgw(8) and
# embgw-gen(8) from doc/gateway.md (dist/man/md2man.py); this checks that
#  - every setting lib/conf accepts is documented in doc/configuration.md,
#    each group's settings together in one section (a group's key list in
#    lib/conf/*.c: `static const char *const ...keys[] = { ... }`),
#  - every setting a table of doc/configuration.md lists is accepted,
#  - every option gw_options.c names is in doc/gateway.md: the gateway's
#    in "## Options" (embgw(8)), the load options in "## Load generation"
#    (embgw-gen(8)),
#  - the generated pages carry them all and groff renders them without a
#    warning.
# usage: man_pages.sh SRCDIR PAGEDIR
set -u
src=$1 pages=$2
fail=0
out=$(/usr/bin/python3 - "$src" "$pages" <<'PY'
import glob, re, sys
src, pages = sys.argv[1], sys.argv[2]
bad = []
# the key lists lib/conf checks every group against
arrays = []
for path in sorted(glob.glob(src + "/lib/conf/*.c")):
    text = open(path).read()
    for m in re.finditer(r"static const char \*const (\w*keys)\[\] = \{(.*?)NULL\s*\};",
                         text, re.S):
        arrays.append((path.split("/")[-1] + ":" + m.group(1),
                       re.findall(r'"([a-z_0-9]+)"', m.group(2))))
if len(arrays) < 5:
    bad.append("lib/conf: only %d key lists found: the pattern no longer "
               "matches the code" % len(arrays))
accepted = {k for _, keys in arrays for k in keys}
doc = open(src + "/doc/configuration.md").read().split("\n")
# sections: a heading and everything under it (a ## holds its ###s)
sections = []
for i, ln in enumerate(doc):
    m = re.match(r"^(#+) ", ln)
    if m:
        j = i + 1
        while j < len(doc) and not (re.match(r"^(#+) ", doc[j]) and
                                    len(re.match(r"^(#+) ", doc[j]).group(1))
                                    <= len(m.group(1))):
            j += 1
        sections.append((ln, "\n".join(doc[i:j])))
def code_words(text):
    """Words inside `code` spans: `driver = "shm"` documents driver."""
    return {w for span in re.findall(r"`([^`]*)`", text)
            for w in re.findall(r"[a-z_0-9]+", span)}
section_words = [code_words(body) for _, body in sections]
top = {re.sub(r"[`#]", "", h).split()[0] for h, _ in sections if h.startswith("## ")}
for name, keys in arrays:
    if set(keys) <= top:
        continue  # the top-level groups: each a section of its own
    if not any(set(keys) <= words for words in section_words):
        missing = sorted(k for k in keys
                         if not any(k in words for words in section_words))
        bad.append("%s (%s): no section of doc/configuration.md documents "
                   "them all%s" % (name, ", ".join(keys),
                                   "; nowhere: " + ", ".join(missing)
                                   if missing else ""))
for ln in doc:
    m = re.match(r"^\| `([a-z_0-9]+)` \|", ln)
    if m and m.group(1) not in accepted:
        bad.append("doc/configuration.md lists `%s`, which lib/conf does not "
                   "accept" % m.group(1))
cfg5 = open(pages + "/embgw.cfg.5").read()
# bold spans (the doc's code) and section headings (upper case there)
cfg5_words = {w for span in re.findall(r"\\fB(.*?)\\fR", cfg5)
              for w in re.findall(r"[a-z_0-9]+", span)} | \
    {w.lower() for ln in cfg5.split("\n") if ln.startswith((".SH", ".SS"))
     for w in re.findall(r"[A-Za-z_0-9]+", ln)}
for k in sorted(accepted):
    if k not in cfg5_words:
        bad.append("embgw.cfg.5: no %s" % k)
# the programs' options: the gateway's (operator and test-build) in
# doc/gateway.md's "## Options" and embgw(8), embgw-gen's load options in
# its "## Load generation" and embgw-gen(8)
opts_c = open(src + "/app/embgw/gw_options.c").read()
def table(name):
    m = re.search(r"static const struct option " + name + r"\[\] = \{(.*?)\n\};",
                  opts_c, re.S)
    return re.findall(r'\{ "([a-z-]+)", (?:no|required)_argument',
                      m.group(1)) if m else []
opts, load = table("operator_lo"), table("load_lo")
if len(opts) < 3 or len(load) < 10:
    bad.append("gw_options.c: only %d operator and %d load options found"
               % (len(opts), len(load)))
doc_gw = open(src + "/doc/gateway.md").read()
def doc_section(heading):
    if ("\n" + heading + "\n") not in doc_gw:
        bad.append("doc/gateway.md: no %s" % heading)
        return ""
    return doc_gw.split("\n" + heading + "\n", 1)[1].split("\n## ", 1)[0]
gw, gen_doc = doc_section("## Options"), doc_section("## Load generation (`embgw-gen`)")
man8 = open(pages + "/embgw.8").read()
gen8 = open(pages + "/embgw-gen.8").read()
def roff(o):
    return "\\-\\-" + o.replace("-", "\\-")
for o in ["version", "check-config"]:
    if roff(o) not in man8:
        bad.append("embgw.8: no --%s" % o)
for group, where, wname, page, pname in (
        (opts, gw, 'doc/gateway.md "## Options"', man8, "embgw.8"),
        (load, gen_doc, 'doc/gateway.md "## Load generation"', gen8,
         "embgw-gen.8")):
    for o in group:
        if roff(o) not in page:
            bad.append("%s: no --%s" % (pname, o))
        if ("--" + o) not in where:
            bad.append("%s: no --%s" % (wname, o))
opts = opts + load
print("\n".join(bad))
print("checked: %d settings in %d groups, %d options" % (len(accepted), len(arrays), len(opts)))
PY
)
grep -v "^checked: " <<<"$out" | grep . && fail=1
for p in embgw.cfg.5 embgw.8 embgw-gen.8; do
	w=$(groff -man -Tutf8 -ww -z "$pages/$p" 2>&1) || { echo "FAIL: groff $p: exit $?"; fail=1; }
	[ -z "$w" ] || { echo "FAIL: groff warns on $p: $w"; fail=1; }
done
[ $fail -eq 0 ] && echo "man pages: $(grep '^checked: ' <<<"$out" | cut -d' ' -f2-), all in doc/ and in the pages"
exit $fail
