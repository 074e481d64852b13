#!/usr/bin/env python3
"""Doxygen's view of spsd's headers (docs/api/Doxyfile, docs/build.md).

The headers document a declaration with the plain `//` comment lines right above it, or with a
`//` comment after it on the same line (a member, an enumerator). Doxygen reads only `///` and
`///<` as documentation, so this prints the header given (or, with --tree, writes a filtered
copy of every header under a folder) with exactly those comments turned into `///` and `///<`:
comments at namespace, class or enum level, never inside a function body (Doxygen would append
those to the function's text). A comment block followed by a blank line, a preprocessor line or
a closing brace documents nothing (a file's opening comment, a section heading) and stays as it
is. A comment above several declarations with no blank line between them (overloads, "Scalar
forms: ...") documents each of them: they become a Doxygen member group, whose text
DISTRIBUTE_GROUP_DOC gives to every member. Lines are never added or removed, so Doxygen's line numbers stay true.
"""
import pathlib
import re
import sys

SCOPE_KEYWORDS = re.compile(r'\b(namespace|class|struct|union|enum)\b')
ACCESS = re.compile(r'^\s*(public|protected|private)\s*:')
TEMPLATE_HEAD = re.compile(r'^\s*template\s*<')


def without_template_head(statement):
    """statement without a leading `template <...>`, whose default arguments (`class C = T`)
    would otherwise make a class template's `{` look like an initializer's."""
    m = TEMPLATE_HEAD.match(statement)
    if not m:
        return statement
    depth = 0
    for i in range(m.end() - 1, len(statement)):
        if statement[i] == '<':
            depth += 1
        elif statement[i] == '>':
            depth -= 1
            if depth == 0:
                return statement[i + 1:]
    return statement


def split_comment(line):
    """Returns (code, comment): comment is the text after a `//` outside string and character
    literals (None when there is none); code is the text before it with literals blanked."""
    code = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == '/' and line.startswith('//', i):
            return ''.join(code), line[i:]
        if c == '/' and line.startswith('/*', i):
            end = line.find('*/', i + 2)
            i = n if end < 0 else end + 2
            code.append(' ')
            continue
        if c in '"\'':
            # Raw strings are not used in the headers; ordinary literals end at an unescaped quote.
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == '\\' else 1
            code.append(c + c)
            i = j + 1
            continue
        code.append(c)
        i += 1
    return ''.join(code), None


class Line:
    """What the filter needs to know of one line: its code and comment, whether it is a
    preprocessor line, and the braces open before and after it (True: a namespace, class or
    enum scope; False: a function body or an initializer)."""

    def __init__(self, text, preprocessor, before):
        self.text = text
        self.preprocessor = preprocessor
        self.before = before
        self.code, self.comment = ('', None) if preprocessor else split_comment(text)
        self.after = before
        self.opens_scope = False
        stripped = text.strip()
        self.whole_comment = stripped.startswith('//')
        self.blank = not stripped

    def declaration_level(self):
        return all(self.before)


def scan(lines):
    result = []
    stack = []       # one entry per open brace (see Line)
    statement = ''   # code since the last ; { or } at the current level, to classify a {
    continued = False
    for text in lines:
        preprocessor = continued or text.lstrip().startswith('#')
        continued = preprocessor and text.rstrip().endswith('\\')
        line = Line(text, preprocessor, tuple(stack))
        for c in line.code:
            if c == '{':
                head = without_template_head(statement)
                scope = bool(SCOPE_KEYWORDS.search(head)) and '(' not in head and '=' not in head
                line.opens_scope |= scope
                stack.append(scope)
                statement = ''
            elif c == '}':
                if stack:
                    stack.pop()
                statement = ''
            elif c == ';':
                statement = ''
            else:
                statement += c
        line.after = tuple(stack)
        result.append(line)
    return result


def run_end(info, first):
    """The declarations a comment block documents: from line first up to the blank line,
    comment, preprocessor line, access specifier or closing brace that ends the run. Returns
    (last line of the run, number of declarations), or None when the run opens a class,
    namespace or enum (a member group cannot hold one)."""
    base = info[first].before
    last, count = None, 0
    for i in range(first, len(info)):
        line = info[i]
        at_base = line.before == base
        if at_base and (line.blank or line.whole_comment or line.preprocessor or ACCESS.match(line.text)
                        or line.code.lstrip().startswith('}')):
            break
        if line.opens_scope:
            return None
        if line.after == base and line.code.rstrip().endswith((';', '}')):
            last, count = i, count + 1
    return (last, count) if last is not None else None


def filter_lines(lines):
    info = scan(lines)
    out = list(lines)
    block = []   # indices of the current run of whole-line comments at declaration level
    groups = []  # (first line, last line) of each member group
    for idx, line in enumerate(info):
        if line.whole_comment and not line.preprocessor:
            if line.declaration_level() and not line.text.lstrip().startswith('///'):
                block.append(idx)
            continue
        if block and not (line.blank or line.preprocessor or ACCESS.match(line.text)
                          or line.code.lstrip().startswith('}')):
            # The comment block documents the declarations right below it; several of them
            # (overloads, a family of accessors) share it as a Doxygen member group.
            for b in block:
                out[b] = lines[b].replace('//', '///', 1)
            run = run_end(info, idx)
            if run and run[1] > 1:
                groups.append((idx, run[0]))
        block = []
        if line.preprocessor or line.comment is None or not line.declaration_level():
            continue
        if line.comment.startswith('///'):
            continue
        tail = line.code.rstrip()
        # A declaration, an enumerator, or a whole inline function on the line (f() { ... }).
        one_line_body = tail.endswith('}') and line.after == line.before and '{' in tail
        if tail.endswith((';', ',')) or one_line_body or re.fullmatch(r'\s*\w+(\s*=\s*[^{}]*)?', tail):
            out[idx] = out[idx][:len(line.code)] + '///<' + line.comment[2:]
    # The markers go in last: they shift the columns the conversions above count on.
    for first, last in groups:
        indent = len(out[first]) - len(out[first].lstrip())
        out[first] = out[first][:indent] + '/** @{ */ ' + out[first][indent:]
        code_end = len(info[last].code.rstrip()) + (len('/** @{ */ ') if last == first else 0)
        out[last] = out[last][:code_end] + ' /** @} */' + out[last][code_end:]
    return out


def main():
    if len(sys.argv) == 4 and sys.argv[1] == '--tree':
        # docs/api/api_docs.py: every header under SRC, filtered, to the same path under DST, in
        # one process (a Doxygen INPUT_FILTER starts one per file: seconds on a busy machine).
        src, dst = pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
        for header in sorted(src.rglob('*.hpp')):
            target = dst / header.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text('\n'.join(filter_lines(header.read_text(encoding='utf-8').split('\n'))),
                              encoding='utf-8')
        return
    if len(sys.argv) != 2:
        sys.exit('usage: comment_filter.py HEADER | comment_filter.py --tree SRC DST')
    with open(sys.argv[1], encoding='utf-8') as f:
        lines = f.read().split('\n')
    sys.stdout.write('\n'.join(filter_lines(lines)))


if __name__ == '__main__':
    main()
