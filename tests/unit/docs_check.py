#!/usr/bin/env python3
"""docs_check.py: the documents cannot drift from the tree.

Fails (exit 1, one line per finding, file:line) when
  1. a document, man page template, script or source comment names a
     repository path that does not exist: a path from a top folder
     (`trainer/comm/algo/ring.c`, `tests/cluster/up`, `docs/`), resolved
     from the top or from a folder above the naming file (a component's
     own "tools/cli.c"), or a bare file name (`algo_ring.c`,
     `algo/ring.c`) that no file of the tree ends with;
  2. a document shows a program with an option its --help lacks: in code
     (Markdown code blocks and `spans`, man page templates) the options
     after a program's name, up to the end of its command, must each be in
     that program's --help;
  3. a comment names an issue number ("issue 14"): the tracker is not the
     code's documentation;
  4. a document's prose gives an option a default that no program's
     --help gives it: "`--wire`, default fp16", "`--algo`, default
     `hybrid`", "`--bucket-kb auto`, the default", "`--wire`, fp16 by
     default", "`--comm-timeout` (default 30 s" are read, and the value
     (its first word) must be a word of the default that --help shows for
     that option ("[fp16]", "(default 1K)", "Default: X.").
The programs and their --help come from the build tree at test time:
every bin_PROGRAMS and dist_bin_SCRIPTS of its Makefile, the jobs and
the scripts of SCRIPTS; so a tool or option added later is checked without
editing this file. That --help and the man pages agree is
tests/unit/man_pages.sh's part (the man pages are made from --help, so
their defaults are --help's).

Usage: docs_check.py SRCDIR BUILDDIR
"""
import glob
import os
import re
import subprocess
import sys

SRC, BLD = sys.argv[1], sys.argv[2]
TOP = ('common', 'plugins', 'topology', 'trainer', 'data', 'jobs', 'tests',
       'tools', 'docs', 'debian')
# Headers of other projects that comments name by their file name.
EXTERNAL = {'spank.h', 'slurm.h', 'pmix.h', 'mpi.h', 'nccl.h', 'cudnn.h',
            'cublas_v2.h', 'cuda_runtime.h', 'hdf5.h', 'turbojpeg.h',
            'dnnl.h', 'check.h', 'getopt.h', 'jpeglib.h', 'png.h',
            'file.c'}  # the placeholder of "file.c:line"
# The scripts of the tree that take --help, besides the jobs.
SCRIPTS = ('tests/cluster/up', 'tests/cluster/down', 'tests/run-all', 'tests/gpu/run')
# What autotools generate: not the project's text.
GENERATED = {'configure', 'configure~', 'config.status', 'libtool', 'config.guess',
             'config.sub', 'depcomp', 'install-sh', 'missing', 'compile',
             'ltmain.sh', 'test-driver', 'ar-lib', 'config.h.in', 'aclocal.m4'}
SKIP_DIRS = {'.git', 'autom4te.cache', 'build-aux', 'm4', '_build', '_inst'}  # distcheck's
findings = []


def _tree_files():
    """Every file of the source tree (not a build tree inside it)."""
    out = []
    for d, ds, fs in os.walk(SRC):
        ds[:] = [x for x in ds if x not in SKIP_DIRS and not x.startswith('.')
                 and not os.path.exists(os.path.join(d, x, 'config.status'))]
        out += [os.path.relpath(os.path.join(d, f), SRC) for f in fs]
    return out


FILES = _tree_files()
SUFFIXES = set()
for _f in FILES:
    _parts = _f.split('/')
    for _i in range(len(_parts)):
        SUFFIXES.add('/'.join(_parts[_i:]))


def _shebang(rel):
    try:
        with open(os.path.join(SRC, rel), 'rb') as f:
            return f.read(2) == b'#!'
    except OSError:
        return False


def _text_of(rel):
    """(kind, text): what of a file is prose for these checks, or None.
    kind: 'md' Markdown, 'man' a man page template, 'c' comments of C/CUDA,
    'sh' comment lines of a script."""
    base = os.path.basename(rel)
    if base in GENERATED or base.endswith('~'):
        return None, None
    if rel.endswith('.md'):
        kind = 'md'
    elif rel.startswith('docs/man/') and (rel.endswith('.in') or rel.endswith('.7')):
        kind = 'man'
    elif rel.endswith(('.c', '.h', '.cu')):
        kind = 'c'
    elif rel.endswith(('.sh', '.py', '.spec')) or _shebang(rel):
        kind = 'sh'
    else:
        return None, None
    try:
        with open(os.path.join(SRC, rel), encoding='utf-8') as f:
            text = f.read()
    except (UnicodeDecodeError, IsADirectoryError):
        return None, None
    if kind == 'man':
        text = re.sub(r'\\f[BIRP]|\\&|\\\(em', '', text.replace('\\-', '-'))
    elif kind == 'c':
        # Keep comments, blank out code, line numbers intact.
        def keep(m):
            s = m.group(0)
            return s if s.startswith(('/*', '//')) else re.sub(r'[^\n]', ' ', s)
        text = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|[^/"]+|/',
                      keep, text, flags=re.S)
    elif kind == 'sh':
        text = '\n'.join(l if l.lstrip().startswith('#') else ''
                         for l in text.split('\n'))
    return kind, text


def _exists(token, rel):
    """Is token a path of the tree (or of the build tree), from the top or
    from a folder above rel? A program's name stands for its source."""
    t = token.rstrip('/')
    d = os.path.dirname(rel)
    while True:
        for root in (SRC, BLD):
            q = os.path.join(root, d, t)
            if os.path.exists(q) or glob.glob(glob.escape(q) + '.*'):
                return True
        if not d:
            return False
        d = os.path.dirname(d)


FULL = re.compile(r'(?<![\w./$~{}-])((?:%s)/[\w.+/-]*)' % '|'.join(TOP))
BARE = re.compile(r'(?<![\w./$~<{}-])(\w[\w/.+-]*\.(?:c|h|cu|sh|mk|py|md))(?![\w*<{$])')


def check_paths(rel, text):
    for n, line in enumerate(text.split('\n'), 1):
        for m in FULL.finditer(line):
            t = m.group(1).rstrip('.,:;)')
            if line[m.end():m.end() + 1] in ('*', '<', '{', '$', '%', '['):
                continue  # a pattern, not a path
            last = t.rstrip('/').split('/')[-1]
            # Slurm's plugin names (topology/tree, topology/block).
            if t.startswith('topology/') and t.count('/') == 1 and '.' not in last:
                continue
            if not _exists(t, rel):
                findings.append('%s:%d: names %s, which does not exist' % (rel, n, t))
        for m in BARE.finditer(line):
            t = m.group(1)
            if t.split('/')[0] in TOP or t in EXTERNAL or t in SUFFIXES:
                continue
            if _exists(t, rel):
                continue
            findings.append('%s:%d: names %s, which no file of the tree is' % (rel, n, t))


ISSUE = re.compile(r'\bissues? #?\d+|\(#\d+\)', re.I)


def check_issue_numbers(rel, kind, text):
    if kind not in ('c', 'sh'):
        return
    for n, line in enumerate(text.split('\n'), 1):
        if ISSUE.search(line):
            findings.append('%s:%d: a comment names an issue number: %s'
                            % (rel, n, line.strip()))


def _makefile_programs():
    """(name, path) of every program and script the build installs."""
    with open(os.path.join(BLD, 'Makefile'), encoding='utf-8') as f:
        mk = f.read().replace('\\\n', ' ')
    progs = []
    for var, root in (('bin_PROGRAMS', BLD), ('dist_bin_SCRIPTS', SRC)):
        m = re.search(r'^%s =(.*)$' % var, mk, re.M)
        for p in (m.group(1).split() if m else []):
            p = p.replace('$(EXEEXT)', '')
            progs.append((os.path.basename(p), os.path.join(root, p)))
    if len(progs) < 5:
        sys.exit('docs_check: found only %d programs in %s/Makefile' % (len(progs), BLD))
    return progs


def _programs():
    """name -> --help text, for the installed programs, the jobs and the
    cluster scripts (by their path in the tree, e.g. jobs/stage)."""
    out = {}
    cands = _makefile_programs()
    for p in sorted(glob.glob(os.path.join(SRC, 'jobs', '*'))) + \
            [os.path.join(SRC, x) for x in SCRIPTS]:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            cands.append((os.path.relpath(p, SRC), p))
    for name, path in cands:
        r = subprocess.run([path, '--help'], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        if r.returncode != 0 or not r.stdout.strip():
            findings.append('%s --help: exit %d, %d bytes of help'
                            % (name, r.returncode, len(r.stdout)))
            continue
        out[name] = r.stdout
    return out


def _code_of(kind, text):
    """(line number, code) pieces of a document: Markdown code blocks (a
    command continued with a backslash joined), `spans` (also across a
    line break), man templates whole."""
    pieces = []
    lines = text.split('\n')
    if kind == 'man':
        return list(enumerate(lines, 1))
    fence, held, start = False, '', 0
    prose = []  # the other lines, blanked where they are code
    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith('```'):
            fence = not fence
            prose.append('')
            continue
        if fence or line.startswith('    '):
            if not held:
                start = n
            held += ' ' + re.sub(r'(^|\s)#.*', '', line).rstrip('\\')
            if not line.rstrip().endswith('\\'):
                pieces.append((start, held))
                held = ''
            prose.append('')
            continue
        prose.append(line)
    joined = '\n'.join(prose)
    for m in re.finditer(r'`([^`]+)`', joined):
        n = joined.count('\n', 0, m.start()) + 1
        pieces.append((n, m.group(1).replace('\n', ' ')))
    return pieces


OPTION = re.compile(r'(?:^|(?<=[\s\[(|]))(--[a-z0-9][a-z0-9-]*|-[A-Za-z](?=[\s=\]]|$))')


def check_options(rel, kind, text, helps):
    if kind not in ('md', 'man'):
        return
    names = sorted(helps, key=len, reverse=True)
    pat = re.compile(r'(?:^|(?<=[\s/(`\'"]))(%s)(?=$|[\s\'"`])'
                     % '|'.join(re.escape(x.split('/')[-1] if '/' not in x else x)
                                for x in names))
    for n, code in _code_of(kind, text):
        for m in pat.finditer(code):
            name = m.group(1)
            prog = next((x for x in names if x == name or x.endswith('/' + name)), None)
            if prog is None:
                continue
            # The command runs to a separator or to the next program.
            rest = re.split(r'\||;|&&|\)|\s(?:srun|sbatch|salloc|mpirun|make)\s', code[m.end():])[0]
            nxt = pat.search(rest)
            if nxt:
                rest = rest[:nxt.start()]
            for o in OPTION.findall(rest):
                if not re.search(r'(?<![\w-])%s(?![\w-])' % re.escape(o), helps[prog]):
                    findings.append('%s:%d: shows %s %s, which %s --help lacks'
                                    % (rel, n, name, o, name))


OPT_LINE = re.compile(r'^ {2,8}(?:-\w, )?(--[a-z0-9][a-z0-9-]*)')
HELP_DEFAULT = (re.compile(r'\[([^\[\]]+)\]\s*$'),
                re.compile(r'\(default:? ([^)]+)\)'),
                re.compile(r'\bDefault: ([^.]+(?:\.\d[^.]*)?)\.'))


def _help_defaults(helps):
    """option -> {program: default text} from every --help: the option's
    description (its line and the deeper ones after it) ending in [X], or
    holding "(default X)" or "Default: X."."""
    out = {}
    for prog, text in helps.items():
        cur, desc = None, ''
        for line in text.split('\n') + ['']:
            m = OPT_LINE.match(line)
            if m or not line.startswith('   '):
                for pat in HELP_DEFAULT if cur else ():
                    d = pat.search(desc.strip())
                    if d:
                        out.setdefault(cur, {})[prog] = d.group(1)
                        break
                cur, desc = (m.group(1), line[m.end():]) if m else (None, '')
            else:
                desc += ' ' + line.strip()
    return out


DOC_DEFAULT = re.compile(
    r'`(--[a-z0-9][a-z0-9-]*)(?: ([^`|\s]+)[^`]*)?`'
    r'(?:,\s+the\s+default\b'
    r'|,?\s+default(?:\s+is)?,?\s+`?([^`\s,;:)]+)'
    r'|,?\s+\(default:?\s+`?([^`\s,;:)]+)'
    r'|,\s+`?([^`\s,;]+)`?\s+by\s+default)')


def check_defaults(rel, kind, text, defaults):
    if kind != 'md':
        return
    for m in DOC_DEFAULT.finditer(text):
        opt = m.group(1)
        said = m.group(3) or m.group(4) or m.group(5)
        if m.group(0).endswith('the default'):
            said = m.group(2)  # `--opt VALUE`, the default
        if not said or opt not in defaults:
            continue
        said = said.rstrip('.')
        if any(re.search(r'(?<![\w$/.-])%s(?![\w/-])' % re.escape(said), d)
               for d in defaults[opt].values()):
            continue
        n = text.count('\n', 0, m.start()) + 1
        findings.append('%s:%d: says %s defaults to %s, but --help says %s'
                        % (rel, n, opt, said, '; '.join(
                            '%s [%s]' % kv for kv in sorted(defaults[opt].items()))))


def main():
    helps = _programs()
    defaults = _help_defaults(helps)
    for rel in sorted(FILES):
        kind, text = _text_of(rel)
        if kind is None:
            continue
        check_paths(rel, text)
        check_issue_numbers(rel, kind, text)
        check_options(rel, kind, text, helps)
        check_defaults(rel, kind, text, defaults)
    for f in findings:
        print('FAIL: ' + f)
    if findings:
        return 1
    print('ok: %d files: every path they name exists, every option they show '
          'for one of %d programs is in its --help, every default they give '
          'one of %d options is its --help\'s, no issue numbers'
          % (sum(1 for r in FILES if _text_of(r)[0]), len(helps), len(defaults)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
