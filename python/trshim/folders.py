"""The trace folder and the shim's rules for it (shim/base/tr_files.c): a folder of this user or
root, not writable by others without the sticky bit, no link of another user on the way.
trshim run makes the folder (prepare_folder); trshim doctor checks it (folder_problem)."""
import os
import tempfile


def prepare_folder(d):
    """None when the shim can record into d (made, mode 0700, when missing), else why it cannot"""
    if os.path.realpath(d) == "/":
        return "the trace folder cannot be / (every rank writes two files into it)"
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
    except OSError as e:
        return "cannot make the trace folder %s: %s" % (d, e.strerror)
    return folder_problem(d)


def folder_problem(d):
    """None when d, an existing folder, passes the shim's rules (shim/base/tr_files.c) and takes a new file,
    else why not"""
    me = os.geteuid()
    path = "/"
    for part in [p for p in d.split("/") if p]:
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except OSError:
            break
        if os.path.islink(path) and st.st_uid not in (me, 0):
            return "%s is a symbolic link owned by uid %d: the shim refuses it" % (path, st.st_uid)
    try:
        st = os.stat(d)
    except OSError as e:
        return "%s: %s" % (d, e.strerror)
    if not os.path.isdir(d):
        return "%s is not a folder" % d
    if st.st_uid not in (me, 0):
        return "%s is owned by uid %d, not by this user (uid %d) or root: the shim refuses it" % (d, st.st_uid, me)
    if st.st_mode & 0o022 and not st.st_mode & 0o1000:
        return ("%s is writable by group or others without the sticky bit (mode %04o): the shim refuses it" %
                (d, st.st_mode & 0o7777))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".trshim-check.", dir=d)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        return "%s: cannot create a file: %s" % (d, e.strerror)
    return None
