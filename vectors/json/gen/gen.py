#!/usr/bin/env python3
"""Generate the felix JSON control-message conformance vectors.

Reads schema.txt (the field tables of docs/messages.md, transcribed by hand)
and cases.txt (hand-written non-canonical, extra and invalid inputs), and
writes NAME.json + NAME.hex pairs (format: vectors/FORMAT.md) into the
directory given as the first argument (default: the parent directory).

This is an independent reference model of the encoding rules of docs/messages.md, written
without looking at the Go codec:
  * <type>_full / <type>_min / <type>_noncanonical_* vectors are built from
    the schema: the canonical text comes from encode() below;
  * every input (generated or hand-written) is decoded by decode() below and
    re-encoded; an input that is not canonical gets canonical_frame_hex, an
    input the model rejects must be listed as invalid with the same class,
    and a hand-written case marked canonical must re-encode to itself.

Usage: python3 gen.py [--pending] [OUTDIR]

A case with a `pending:` line follows docs/messages.md but fails against the current
Go codec (the line says why); it is written only with --pending, so that the
committed vector set stays green while the codec question is open.
"""
import base64
import binascii
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------- schema

class Field:
    def __init__(self, name, typ, enc, sample):
        self.name, self.typ, self.enc, self.sample = name, typ, enc, sample


def load_schema(path):
    samples, structs, msgs, notes = {}, {}, {}, {}
    section, cur = None, None
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line in ("[samples]", "[schema]"):
            section = line
            continue
        if section == "[samples]":
            k, v = line.split("=", 1)
            samples[k.strip()] = json.loads(v)
            continue
        m = re.match(r"^(struct|msg) (\S+)$", line)
        if m:
            cur = []
            (structs if m.group(1) == "struct" else msgs)[m.group(2)] = cur
            last = m.group(2)
            continue
        s = line.strip()
        if s.startswith("note "):
            notes[last] = s[len("note "):]
            continue
        m = re.match(r"^(\S+) (\S+) (\S+)(?: = (.*))?$", s)
        if not m:
            raise SystemExit("schema: bad line: " + line)
        sample = json.loads(m.group(4)) if m.group(4) is not None else None
        cur.append(Field(m.group(1), m.group(2), m.group(3), sample))
    return samples, structs, msgs, notes


SAMPLES, STRUCTS, MSGS, FULL_NOTES = load_schema(os.path.join(HERE, "schema.txt"))

RANGES = {"u16": (0, 2**16 - 1), "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1),
          "i64": (-2**63, 2**63 - 1)}
RETRY_WORDS = ["retry", "retry_after", "redirect", "outcome_unknown", "fatal"]
# PublishRefusalReason object variants and StateChange ops (docs/messages.md section 2)
REFUSAL_SHAPES = {"sequence_gap": [Field("expected", "u64", "req", None)],
                  "offset_mismatch": [Field("tail", "u64", "req", None)],
                  "not_leader": [Field("node_id", "str", "req", None),
                                 Field("addr", "str", "omit", None)]}
CHANGE_SHAPES = {"put": [Field("key", "str", "req", None), Field("value", "b64", "req", None)],
                 "delete": [Field("key", "str", "req", None)]}

# ---------------------------------------------------------------- JSON parsing

class Invalid(Exception):
    def __init__(self, cls, why):
        super().__init__(why)
        self.cls = cls


class Num:
    """A JSON number with a fraction or exponent, kept as its text."""
    def __init__(self, text):
        self.text = text


class Obj(dict):
    """A JSON object; dups names the members that occur more than once.
    A duplicate is an error only where the member is read (a known member,
    a tag): unknown members are skipped unread, as serde does."""
    dups = frozenset()


def _pairs(pairs):
    d, dups = Obj(), set()
    for k, v in pairs:
        if k in d:
            dups.add(k)
        d[k] = v
    d.dups = frozenset(dups)
    return d


def _nodup(obj, name, path):
    if name in getattr(obj, "dups", ()):
        raise Invalid("invalid_json", "%s: duplicate member %s" % (path, name))


def _const(c):
    raise Invalid("invalid_json", "not JSON: " + c)


def parse(payload):
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as e:
        # invalid bytes inside a string are invalid_utf8; elsewhere the
        # payload is simply not JSON
        try:
            json.loads(payload.decode("utf-8", errors="replace"))
        except (json.JSONDecodeError, Invalid):
            raise Invalid("invalid_json", "not JSON (and not UTF-8)")
        raise Invalid("invalid_utf8", str(e))
    try:
        # "-0" is kept as text: upstream parses it as a float (so "-" on an
        # unsigned field is refused, docs/messages.md 1.3)
        v = json.loads(text, object_pairs_hook=_pairs, parse_float=Num,
                       parse_int=lambda s: Num(s) if s == "-0" else int(s),
                       parse_constant=_const)
    except json.JSONDecodeError as e:
        raise Invalid("invalid_json", str(e))
    _check_surrogates(v)
    return v


def _check_surrogates(v):
    """A \\u escape naming a lone surrogate is refused (serde_json does)."""
    if type(v) is str:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid("invalid_json", "lone surrogate escape")
    elif type(v) is list:
        for e in v:
            _check_surrogates(e)
    elif isinstance(v, dict):
        for k, e in v.items():
            _check_surrogates(k)
            _check_surrogates(e)

# ---------------------------------------------------------------- decoding

def _is_int(v):
    return type(v) is int


def dec_type(t, v, path):
    """Decode JSON value v of schema type t; raise Invalid on any rule break."""
    def bad(why):
        raise Invalid("invalid_json", "%s: %s" % (path, why))
    if t in RANGES:
        if not _is_int(v):
            bad("not an integer")
        lo, hi = RANGES[t]
        if not lo <= v <= hi:
            bad("out of range")
        return v
    if t == "str":
        if type(v) is not str:
            bad("not a string")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            bad("lone surrogate")
        return v
    if t == "bool":
        if type(v) is not bool:
            bad("not a bool")
        return v
    if t == "b64":
        if type(v) is not str:
            bad("not a base64 string")
        try:
            raw = base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError):
            bad("bad base64")
        if base64.b64encode(raw).decode() != v:
            bad("non-canonical base64")
        return v
    if t == "retry":
        if type(v) is not str:
            bad("not a string")
        return v if v in RETRY_WORDS else "fatal"
    if t == "any":
        return v
    if t.startswith("["):
        if type(v) is not list:
            bad("not an array")
        return [dec_type(t[1:-1], e, "%s[%d]" % (path, i)) for i, e in enumerate(v)]
    if t.startswith("enum:"):
        if type(v) is not str or v not in t[5:].split("|"):
            bad("not one of " + t[5:])
        return v
    if t == "start":
        if v in ("latest", "earliest"):
            return v
        return _one_member(v, {"offset": "u64"}, path)
    if t == "cond":
        if v == "absent":
            return v
        return _one_member(v, {"version": "u64"}, path)
    if t == "prr":
        if v in ("unknown_producer", "sequence_expired", "sequence_reused"):
            return v
        if not isinstance(v, dict) or len(v) != 1 or v.dups:
            bad("not a refusal reason")
        (k, inner), = v.items()
        if k not in REFUSAL_SHAPES:
            bad("unknown refusal reason " + k)
        return {k: dec_fields(REFUSAL_SHAPES[k], inner, path + "." + k)}
    if t == "change":
        if not isinstance(v, dict):
            bad("not an object")
        _nodup(v, "op", path)
        op = v.get("op")
        if type(op) is not str:
            bad("op is not a string")
        if op not in CHANGE_SHAPES:
            bad("bad op")
        out = {"op": op}
        out.update(dec_fields(CHANGE_SHAPES[op], v, path))
        return out
    if t in STRUCTS:
        return dec_fields(STRUCTS[t], v, path)
    raise SystemExit("schema: unknown type " + t)


def _one_member(v, shape, path):
    if isinstance(v, dict) and v.dups:
        raise Invalid("invalid_json", path + ": duplicate member")
    if not isinstance(v, dict) or len(v) != 1 or list(v)[0] not in shape:
        raise Invalid("invalid_json", path + ": bad tagged variant")
    k = list(v)[0]
    return {k: dec_type(shape[k], v[k], path + "." + k)}


def zero(f):
    if f.typ == "bool":
        return False
    if f.typ in RANGES:
        return 0
    if f.typ in STRUCTS:
        return dec_fields(STRUCTS[f.typ], {}, f.name)
    if f.typ.startswith("["):
        return []
    raise SystemExit("schema: no zero for " + f.typ)


def dec_fields(fields, obj, path):
    """Decode the members of an object; absent members are left out of the result."""
    if not isinstance(obj, dict):
        raise Invalid("invalid_json", path + ": not an object")
    out = {}
    for f in fields:
        p = path + "." + f.name
        _nodup(obj, f.name, path)
        if f.name not in obj:
            if f.enc in ("req", "null!"):
                raise Invalid("invalid_json", p + ": missing")
            if f.enc in ("dflt", "omit0", "omitempty"):
                out[f.name] = zero(f)
            continue
        v = obj[f.name]
        if v is None:
            if f.enc in ("omit", "null", "null!", "nullomit"):
                continue
            raise Invalid("invalid_json", p + ": null")
        out[f.name] = dec_type(f.typ, v, p)
    return out


def decode(payload):
    """Returns (type, value) for a known type, (type, None) for an unknown one."""
    v = parse(payload)
    if not isinstance(v, dict):
        raise Invalid("invalid_json", "not an object")
    _nodup(v, "type", "message")
    if "type" not in v:
        raise Invalid("invalid_json", "missing type")
    t = v["type"]
    if type(t) is not str:
        raise Invalid("invalid_json", "type is not a string")
    if t not in MSGS:
        return t, None
    return t, dec_fields(MSGS[t], v, t)

# ---------------------------------------------------------------- encoding

def enc_str(s):
    out = ['"']
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n",
             "\r": "\\r", "\t": "\\t"}
    for ch in s:
        if ch in short:
            out.append(short[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def enc_any(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if _is_int(v):
        return str(v)
    if isinstance(v, Num):
        return v.text
    if type(v) is str:
        return enc_str(v)
    if type(v) is list:
        return "[" + ",".join(enc_any(e) for e in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(enc_str(k) + ":" + enc_any(e) for k, e in v.items()) + "}"
    raise TypeError(v)


def enc_type(t, v):
    if t.startswith("["):
        return "[" + ",".join(enc_type(t[1:-1], e) for e in v) + "]"
    if t == "change":
        body = enc_fields(CHANGE_SHAPES[v["op"]], v)
        return '{"op":' + enc_str(v["op"]) + ("," + body if body else "") + "}"
    if t == "prr" and isinstance(v, dict):
        (k, inner), = v.items()
        return "{" + enc_str(k) + ":{" + enc_fields(REFUSAL_SHAPES[k], inner) + "}}"
    if t in STRUCTS:
        return "{" + enc_fields(STRUCTS[t], v) + "}"
    return enc_any(v)


def enc_fields(fields, obj):
    parts = []
    for f in fields:
        present = f.name in obj
        v = obj.get(f.name)
        if f.enc in ("omit", "nullomit") and not present:
            continue
        if f.enc == "omit0" and (not present or v in (0, False)) and v is not True:
            continue
        if f.enc == "omitempty" and not v:
            continue
        if f.enc in ("null", "null!") and not present:
            parts.append(enc_str(f.name) + ":null")
            continue
        if f.enc in ("dflt", "omitempty", "omit0") and not present:
            v = zero(f)
        parts.append(enc_str(f.name) + ":" + enc_type(f.typ, v))
    return ",".join(parts)


def encode(t, value):
    body = enc_fields(MSGS[t], value)
    return ('{"type":' + enc_str(t) + ("," + body if body else "") + "}").encode("utf-8")

# ---------------------------------------------------------------- sample values

def sample_full(f, owner):
    if f.sample is not None:
        return f.sample
    if f.typ in STRUCTS:
        return full_obj(STRUCTS[f.typ], f.typ)
    if f.typ.startswith("[") and f.typ[1:-1] in STRUCTS:
        st = f.typ[1:-1]
        return [full_obj(STRUCTS[st], st), min_obj(STRUCTS[st])]
    key = f.name + "_b64" if f.typ == "b64" and f.name + "_b64" in SAMPLES else f.name
    if key not in SAMPLES:
        raise SystemExit("schema: no sample for %s.%s" % (owner, f.name))
    return SAMPLES[key]


def full_obj(fields, owner):
    return {f.name: sample_full(f, owner) for f in fields}


def min_value(f):
    t = f.typ
    if t == "str" or t == "b64":
        return ""
    if t in RANGES:
        return 0
    if t == "bool":
        return False
    if t.startswith("["):
        return []
    if t.startswith("enum:"):
        return t[5:].split("|")[0]
    if t in STRUCTS:
        return min_obj(STRUCTS[t])
    return {"start": "latest", "cond": "absent", "prr": "unknown_producer"}[t]


def min_obj(fields):
    """Required members at their zero value, optional members absent."""
    out = {}
    for f in fields:
        if f.enc in ("req", "dflt"):
            out[f.name] = min_value(f)
    return out

# ---------------------------------------------------------------- output

HEADER = bytes.fromhex("464c583100010000")


def frame(payload):
    return HEADER + len(payload).to_bytes(4, "big") + payload


class Out:
    def __init__(self, outdir):
        self.outdir, self.names = outdir, set()

    def write(self, name, obj):
        if name in self.names:
            raise SystemExit("duplicate vector name " + name)
        self.names.add(name)
        with open(os.path.join(self.outdir, name + ".json"), "w", encoding="utf-8") as fh:
            fh.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
        with open(os.path.join(self.outdir, name + ".hex"), "w") as fh:
            fh.write(obj["frame_hex"] + "\n")

    def valid(self, name, payload, note=None, expect_canonical=None):
        t, value = decode(payload)
        canon = payload if value is None else encode(t, value)
        if expect_canonical is True and canon != payload:
            raise SystemExit("%s: expected canonical, model re-encodes to %s" % (name, canon))
        if expect_canonical is False and canon == payload:
            raise SystemExit("%s: expected non-canonical input" % name)
        obj = {"name": name, "payload_json": payload.decode("utf-8"), "message_type": t,
               "payload_hex": payload.hex(), "frame_hex": frame(payload).hex()}
        if canon != payload:
            obj["canonical_frame_hex"] = frame(canon).hex()
        if note:
            obj["note"] = note
        self.write(name, obj)

    def invalid(self, name, payload, cls, note):
        try:
            decode(payload)
        except Invalid as e:
            if e.cls != cls:
                raise SystemExit("%s: model says %s, case says %s" % (name, e.cls, cls))
        else:
            raise SystemExit("%s: model accepts the input" % name)
        obj = {"name": name, "kind": "invalid", "layout": "json_message", "error": cls,
               "payload_hex": payload.hex(), "frame_hex": frame(payload).hex()}
        if note:
            obj["note"] = note
        self.write(name, obj)

# ---------------------------------------------------------------- generated families

def pairs_of(payload):
    """The top-level members of a JSON text as (name, value) pairs (objects as pair lists)."""
    return json.loads(payload, object_pairs_hook=list, parse_float=Num)


def render(pairs):
    return ("{" + ",".join(enc_str(k) + ":" + _raw(v) for k, v in pairs) + "}").encode("utf-8")


def _raw(v):
    if type(v) is list and v and all(type(e) is tuple for e in v):  # object as pairs
        return render(v).decode("utf-8")
    if type(v) is list:
        return "[" + ",".join(_raw(e) for e in v) + "]"
    if v == []:
        return "[]"
    return enc_any(v)


def has_optional(fields, seen=()):
    for f in fields:
        if f.enc != "req":
            return True
        st = f.typ.strip("[]")
        if st in STRUCTS and st not in seen and has_optional(STRUCTS[st], seen + (st,)):
            return True
        if f.typ in ("prr", "start", "cond", "change", "[change]"):
            return True
    return False


def generate(out):
    for t, fields in MSGS.items():
        full = full_obj(fields, t)
        mn = min_obj(fields)
        full_text = encode(t, full)
        opt = has_optional(fields)
        nested_lists = [f.name for f in fields if f.sample is None and f.typ.startswith("[")
                        and f.typ[1:-1] in STRUCTS]
        if opt:
            note = "every optional member present (also inside nested objects)"
        elif fields:
            note = "no optional members; every member at a non-zero value"
        else:
            note = "the message has no members besides type"
        if nested_lists:
            note += "; the second element of %s has only its required members" % ", ".join(nested_lists)
        if t in FULL_NOTES:
            note += "; " + FULL_NOTES[t]
        out.valid(t + "_full", full_text, note, True)
        if opt:
            mnote = ("every optional member absent (null / null! members written as null, dflt members "
                     "written at their default); required members at zero / empty values")
        elif fields:
            mnote = "required members at zero / empty values"
        else:
            mnote = "the message has no members besides type"
        if t in FULL_NOTES and "both key and prefix" not in FULL_NOTES[t]:
            mnote += "; " + FULL_NOTES[t]
        out.valid(t + "_min", encode(t, mn), mnote, True)
        pairs = pairs_of(full_text)
        if fields:
            out.valid(t + "_noncanonical_reordered", render(pairs[1:][::-1] + pairs[:1]),
                      "members of %s_full in reverse order, `type` last: serde's internally tagged "
                      "decoding accepts any member order" % t, False)
        nullable = [f.name for f in fields if f.enc in ("omit", "null", "nullomit")]
        if nullable:
            have = dict(pairs)
            np = [pairs[0]]
            for f in fields:
                if f.name in nullable:
                    np.append((f.name, None))
                elif f.name in have:
                    np.append((f.name, have[f.name]))
            out.valid(t + "_noncanonical_nulls", render(np),
                      "every optional member (%s) written as null: for the omit / null encodings "
                      "null means absent (docs/messages.md section 1.2)" % ", ".join(nullable), False)
        dflt = [f.name for f in fields if f.enc == "dflt"]
        if dflt:
            out.valid(t + "_noncanonical_defaults_missing",
                      render([p for p in pairs if p[0] not in dflt]),
                      "dflt members (%s) left out: a missing dflt member decodes as its default "
                      "(0 / false / empty), and the canonical form writes it (docs/messages.md 1.2)"
                      % ", ".join(dflt), False)
        omit0 = {f.name: f for f in fields if f.enc == "omit0"}
        if omit0:
            zp = [(k, zero(omit0[k]) if k in omit0 else v) for k, v in pairs]
            out.valid(t + "_noncanonical_explicit_zero", render(zp),
                      "omit0 members (%s) written explicitly as 0 / false: accepted, and left out by "
                      "the canonical form (docs/messages.md 1.2)" % ", ".join(omit0), False)


def load_cases(path):
    cases, cur = [], None
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r"^== (valid|noncanonical|invalid(?::(\S+))?) (\S+)$", line)
        if m:
            cur = {"mode": m.group(1).split(":")[0], "cls": m.group(2) or "invalid_json",
                   "name": m.group(3)}
            cases.append(cur)
            continue
        k, v = line.split(": ", 1)
        if k == "payload":
            cur["payload"] = v.encode("utf-8")
        elif k == "payload_str":
            cur["payload"] = json.loads(v).encode("utf-8")
        elif k == "payload_hex":
            cur["payload"] = bytes.fromhex(v)
        elif k == "note":
            cur["note"] = v
        elif k == "pending":
            cur["pending"] = v
        else:
            raise SystemExit("cases: bad line " + line)
    return cases


def main():
    args = sys.argv[1:]
    pending = "--pending" in args
    args = [a for a in args if a != "--pending"]
    outdir = args[0] if args else os.path.dirname(HERE)
    for n in os.listdir(outdir):
        if n.endswith(".json") or n.endswith(".hex"):
            os.remove(os.path.join(outdir, n))
    out = Out(outdir)
    generate(out)
    for c in load_cases(os.path.join(HERE, "cases.txt")):
        if "pending" in c and not pending:
            continue
        if c["mode"] == "invalid":
            out.invalid(c["name"], c["payload"], c["cls"], c.get("note"))
        else:
            out.valid(c["name"], c["payload"], c.get("note"), c["mode"] == "valid")
    print("%d vectors written to %s" % (len(out.names), outdir))


if __name__ == "__main__":
    main()
