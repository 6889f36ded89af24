"""What check_visual.py reads an HTML page with: a DOM tree from the
standard library's parser (Node, parse), headless chromium (browser: the
DOM it rendered, a screenshot), a PNG's pixels by colour, and the check that
nothing on the page refers to the network. Python 3 standard library only."""
import html.parser
import re
import shutil
import struct
import subprocess
import tempfile
import zlib

from checks import Failure, check, eq  # noqa: E402  (tests/common/checks.py, on the path of check_visual.py)

WIN_W, WIN_H = 1400, 2000           # the browser window (the screenshot's size)


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    def text(self):
        return "".join(ch if isinstance(ch, str) else ch.text() for ch in self.children)

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def walk(self):
        yield self
        for ch in self.children:
            if isinstance(ch, Node):
                yield from ch.walk()

    def find(self, tag=None, cls=None, **attrs):
        return [n for n in self.walk() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes())
                and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def child_title(self):
        t = [ch for ch in self.children if isinstance(ch, Node) and ch.tag == "title"]
        return t[0].text() if t else ""


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Tree(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", [], None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse(text):
    t = Tree()
    t.feed(text)
    t.close()
    return t.root


def chromium():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    raise Failure("chromium is not installed: the html cases need a real browser (Debian's chromium package; "
                  "tests/run installs it: apt-get install -y chromium)")


def browser(c, page, *args):
    prof = tempfile.mkdtemp(prefix="chromium-", dir=c.tmp)
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + prof,
           "--no-first-run", "--window-size=%d,%d" % (WIN_W, WIN_H)] + list(args) + [page]
    p = subprocess.run(cmd, capture_output=True, timeout=120, cwd=c.tmp)
    check(p.returncode == 0, "%s: status %d\n%s" % (" ".join(cmd), p.returncode, p.stderr.decode(errors="replace")[-2000:]))
    return p.stdout.decode()


def png_pixels(path):
    """(width, height, {colour: count}) of an 8-bit RGB or RGBA PNG"""
    with open(path, "rb") as f:
        d = f.read()
    check(d[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path)
    i, idat, ihdr = 8, [], None
    while i < len(d):
        n, = struct.unpack(">I", d[i:i + 4])
        kind, body = d[i + 4:i + 8], d[i + 8:i + 8 + n]
        check(zlib.crc32(kind + body) == struct.unpack(">I", d[i + 8 + n:i + 12 + n])[0], "%s: bad CRC" % path)
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        i += 12 + n
    check(ihdr is not None and idat, "%s: no IHDR or IDAT" % path)
    w, h, depth, ctype, _, _, interlace = ihdr
    check(depth == 8 and ctype in (2, 6) and interlace == 0, "%s: an unexpected PNG kind %r" % (path, ihdr))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    eq(len(raw), h * (stride + 1), "%s: decompressed size" % path)
    prev = bytearray(stride)
    colours = {}
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ft == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif ft == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif ft == 3:
            for x in range(stride):
                line[x] = (line[x] + ((line[x - bpp] if x >= bpp else 0) + prev[x]) // 2) & 255
        elif ft == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b, cc = prev[x], prev[x - bpp] if x >= bpp else 0
                p = a + b - cc
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else cc)) & 255
        else:
            check(ft == 0, "%s: filter type %d" % (path, ft))
        for x in range(0, stride, bpp):
            k = bytes(line[x:x + 3])
            colours[k] = colours.get(k, 0) + 1
        prev = line
    return w, h, colours


URL_ATTRS = ("src", "href", "xlink:href", "action", "formaction", "srcset", "poster", "data", "background", "ping")


def no_network(text, what):
    """no element attribute that names a URL on the network (http:, https:, //), no CSS url() or @import
    that does, no meta refresh"""
    for n in parse(text).walk():
        for k, v in n.attrs.items():
            v = (v or "").strip().lower()
            if k in URL_ATTRS:
                check(not (v.startswith("http:") or v.startswith("https:") or v.startswith("//") or "://" in v),
                      "%s: <%s %s=%r> refers to the network" % (what, n.tag, k, v))
            if k == "style" or (n.tag == "meta" and k == "http-equiv" and v == "refresh"):
                check(k == "style" and not re.search(r"url\(\s*['\"]?\s*(https?:|//)", v),
                      "%s: <%s %s=%r>" % (what, n.tag, k, v))
        if n.tag == "style":
            css_text = n.text()
            check(not re.search(r"url\(\s*['\"]?\s*(https?:|//)", css_text, re.I), "%s: a CSS url() on the network" % what)
            check("@import" not in css_text, "%s: a CSS @import" % what)
