/**
 * A linear-time matcher for the operators' custom WAF patterns (spec/3 §2.5: "a linear-time regex
 * engine"). V8's RegExp backtracks, so a pattern like `(a|a)*b` or `(x+)+y` can stall the worker
 * on a few kilobytes of input even without backreferences or lookaround; its experimental linear
 * engine refuses the `i` flag and `\b`. This is a Thompson NFA simulated over a set of states
 * (no backtracking): O(input length x pattern size) for every pattern it accepts, whatever the
 * input. It answers only "does it match somewhere" (no captures), case-insensitively.
 *
 * Supported: literals and escapes, `.`, classes with ranges and `\d \w \s` (and negations),
 * groups (capturing, named or not), alternation, `* + ? {n} {n,} {n,m}` (lazy forms too: with no
 * captures they match the same), `^ $ \b \B`. Refused: backreferences, lookaround, `\p{…}`.
 */

/** A pattern the engine cannot run. */
export class LinearRegexError extends Error {}

// Program size cap: `{n,m}` copies its operand, so `(a{100}){100}` must not explode.
const MAX_PROGRAM = 20_000;

type Range = readonly [number, number];

interface CharSet {
  readonly ranges: readonly Range[];
  readonly negate: boolean;
}

type Node =
  | { t: 'char'; c: number }
  | { t: 'set'; set: CharSet }
  | { t: 'any' }
  | { t: 'assert'; kind: '^' | '$' | 'b' | 'B' }
  | { t: 'seq'; items: Node[] }
  | { t: 'alt'; alts: Node[] }
  | { t: 'repeat'; node: Node; min: number; max: number };

const DIGIT: Range[] = [[48, 57]];
const WORD: Range[] = [[48, 57], [65, 90], [95, 95], [97, 122]];
const SPACE: Range[] = [[9, 13], [32, 32], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]];

function complement(ranges: readonly Range[]): Range[] {
  const out: Range[] = [];
  let next = 0;
  for (const [lo, hi] of [...ranges].sort((a, b) => a[0] - b[0])) {
    if (lo > next) out.push([next, lo - 1]);
    next = Math.max(next, hi + 1);
  }
  if (next <= 0xffff) out.push([next, 0xffff]);
  return out;
}

/** The class of `\d \D \w \W \s \S`, or undefined for another letter. */
function classEscape(letter: string): Range[] | undefined {
  switch (letter) {
    case 'd': return DIGIT;
    case 'D': return complement(DIGIT);
    case 'w': return WORD;
    case 'W': return complement(WORD);
    case 's': return SPACE;
    case 'S': return complement(SPACE);
    default: return undefined;
  }
}

const CONTROL: Record<string, number> = { t: 9, n: 10, v: 11, f: 12, r: 13, '0': 0 };

/** Recursive-descent parser over the pattern text. */
class Parser {
  private i = 0;
  private readonly p: string;

  constructor(pattern: string) {
    this.p = pattern;
  }

  parse(): Node {
    const node = this.alternation();
    if (this.i < this.p.length) throw new LinearRegexError(`unbalanced ")" at ${this.i}`);
    return node;
  }

  private peek(): string | undefined {
    return this.p[this.i];
  }

  private alternation(): Node {
    const alts = [this.sequence()];
    while (this.peek() === '|') {
      this.i++;
      alts.push(this.sequence());
    }
    return alts.length === 1 ? (alts[0] as Node) : { t: 'alt', alts };
  }

  private sequence(): Node {
    const items: Node[] = [];
    for (let c = this.peek(); c !== undefined && c !== '|' && c !== ')'; c = this.peek()) items.push(this.quantified(this.atom()));
    return { t: 'seq', items };
  }

  private quantified(node: Node): Node {
    let min: number;
    let max: number;
    const c = this.peek();
    if (c === '*') [min, max] = [0, Infinity];
    else if (c === '+') [min, max] = [1, Infinity];
    else if (c === '?') [min, max] = [0, 1];
    else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.p.slice(this.i));
      if (!m) return node;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      this.i += m[0].length - 1;
    } else return node;
    this.i++;
    if (this.peek() === '?') this.i++;
    if (node.t === 'assert') throw new LinearRegexError('nothing to repeat');
    return { t: 'repeat', node, min, max };
  }

  private atom(): Node {
    const c = this.p[this.i++] as string;
    switch (c) {
      case '.':
        return { t: 'any' };
      case '^':
      case '$':
        return { t: 'assert', kind: c };
      case '[':
        return { t: 'set', set: this.charClass() };
      case '(':
        return this.group();
      case '\\':
        return this.escape();
      case '*':
      case '+':
      case '?':
        throw new LinearRegexError('nothing to repeat');
      default:
        return { t: 'char', c: c.charCodeAt(0) };
    }
  }

  private group(): Node {
    if (this.peek() === '?') {
      const kind = this.p.slice(this.i, this.i + 3);
      if (kind.startsWith('?:')) this.i += 2;
      else if (kind.startsWith('?<') && kind !== '?<=' && kind !== '?<!') {
        const end = this.p.indexOf('>', this.i);
        if (end === -1) throw new LinearRegexError('unterminated group name');
        this.i = end + 1;
      } else if (/^\?[=!]|^\?<[=!]/.test(kind)) throw new LinearRegexError('lookaround is not allowed');
      else throw new LinearRegexError(`unsupported group "(${kind}"`);
    }
    const node = this.alternation();
    if (this.p[this.i++] !== ')') throw new LinearRegexError('missing ")"');
    return node;
  }

  /** A code point escape (`\xHH`, `\uHHHH`, `\u{…}`, `\cX`, controls), or undefined. */
  private codeEscape(letter: string): number | undefined {
    if (letter in CONTROL) return CONTROL[letter];
    const rest = this.p.slice(this.i);
    let m: RegExpExecArray | null;
    if (letter === 'x' && (m = /^[0-9a-fA-F]{2}/.exec(rest))) {
      this.i += 2;
      return parseInt(m[0], 16);
    }
    if (letter === 'u' && (m = /^[0-9a-fA-F]{4}/.exec(rest))) {
      this.i += 4;
      return parseInt(m[0], 16);
    }
    if (letter === 'u' && (m = /^\{([0-9a-fA-F]{1,6})\}/.exec(rest))) {
      this.i += m[0].length;
      const cp = parseInt(m[1] as string, 16);
      if (cp > 0xffff) throw new LinearRegexError('code points above U+FFFF are not supported');
      return cp;
    }
    if (letter === 'c' && (m = /^[a-zA-Z]/.exec(rest))) {
      this.i += 1;
      return m[0].charCodeAt(0) % 32;
    }
    return undefined;
  }

  private escape(): Node {
    const letter = this.p[this.i++];
    if (letter === undefined) throw new LinearRegexError('\\ at end of pattern');
    if (letter === 'b' || letter === 'B') return { t: 'assert', kind: letter };
    if (/[1-9]/.test(letter) || letter === 'k') throw new LinearRegexError('backreferences are not allowed');
    if (letter === 'p' || letter === 'P') throw new LinearRegexError('unicode property escapes are not supported');
    const cls = classEscape(letter);
    if (cls) return { t: 'set', set: { ranges: cls, negate: false } };
    const code = this.codeEscape(letter);
    return { t: 'char', c: code ?? letter.charCodeAt(0) };
  }

  private charClass(): CharSet {
    const negate = this.peek() === '^';
    if (negate) this.i++;
    const ranges: Range[] = [];
    let first = true;
    for (;;) {
      const c = this.p[this.i];
      if (c === undefined) throw new LinearRegexError('missing "]"');
      if (c === ']' && !first) break;
      first = false;
      const lo = this.classAtom(ranges);
      if (lo === undefined) continue;
      if (this.peek() === '-' && this.p[this.i + 1] !== ']' && this.p[this.i + 1] !== undefined) {
        this.i++;
        const hi = this.classAtom(ranges);
        if (hi === undefined) throw new LinearRegexError('a class escape cannot end a range');
        if (hi < lo) throw new LinearRegexError('range out of order in character class');
        ranges.push([lo, hi]);
      } else ranges.push([lo, lo]);
    }
    this.i++;
    return { ranges, negate };
  }

  /** One class member: its code, or undefined after adding a `\d`-style class to `ranges`. */
  private classAtom(ranges: Range[]): number | undefined {
    const c = this.p[this.i++] as string;
    if (c !== '\\') return c.charCodeAt(0);
    const letter = this.p[this.i++];
    if (letter === undefined) throw new LinearRegexError('\\ at end of pattern');
    if (letter === 'b') return 8;
    if (letter === 'p' || letter === 'P') throw new LinearRegexError('unicode property escapes are not supported');
    const cls = classEscape(letter);
    if (cls) {
      ranges.push(...cls);
      return undefined;
    }
    return this.codeEscape(letter) ?? letter.charCodeAt(0);
  }
}

// Program instructions. CHAR/SET/ANY consume one input unit; the others are followed at once.
const CHAR = 0;
const SET = 1;
const ANY = 2;
const SPLIT = 3;
const JMP = 4;
const ASSERT = 5;
const MATCH = 6;

interface Inst {
  op: number;
  /** CHAR: the (lower-cased) code; SPLIT/JMP: the first target. */
  a: number;
  /** SPLIT: the second target. */
  b: number;
  set?: CharSet;
  kind?: '^' | '$' | 'b' | 'B';
}

function lowerCode(c: number): number {
  const s = String.fromCharCode(c).toLowerCase();
  return s.length === 1 ? s.charCodeAt(0) : c;
}

function compileNode(node: Node, prog: Inst[]): void {
  if (prog.length > MAX_PROGRAM) throw new LinearRegexError('pattern too large (repeat counts expand it)');
  switch (node.t) {
    case 'char':
      prog.push({ op: CHAR, a: lowerCode(node.c), b: 0 });
      return;
    case 'set':
      prog.push({ op: SET, a: 0, b: 0, set: node.set });
      return;
    case 'any':
      prog.push({ op: ANY, a: 0, b: 0 });
      return;
    case 'assert':
      prog.push({ op: ASSERT, a: 0, b: 0, kind: node.kind });
      return;
    case 'seq':
      for (const item of node.items) compileNode(item, prog);
      return;
    case 'alt': {
      const jumps: Inst[] = [];
      node.alts.forEach((alt, i) => {
        if (i < node.alts.length - 1) {
          const split: Inst = { op: SPLIT, a: prog.length + 1, b: 0 };
          prog.push(split);
          compileNode(alt, prog);
          const jmp: Inst = { op: JMP, a: 0, b: 0 };
          prog.push(jmp);
          jumps.push(jmp);
          split.b = prog.length;
        } else compileNode(alt, prog);
      });
      for (const j of jumps) j.a = prog.length;
      return;
    }
    case 'repeat': {
      const { min, max } = node;
      for (let k = 0; k < min; k++) compileNode(node.node, prog);
      if (max === Infinity) {
        // L: split body, out; body; jmp L
        const split: Inst = { op: SPLIT, a: prog.length + 1, b: 0 };
        const start = prog.length;
        prog.push(split);
        compileNode(node.node, prog);
        prog.push({ op: JMP, a: start, b: 0 });
        split.b = prog.length;
        return;
      }
      // Optional copies nest: each one is only tried after the previous one matched.
      const splits: Inst[] = [];
      for (let k = min; k < max; k++) {
        const split: Inst = { op: SPLIT, a: prog.length + 1, b: 0 };
        prog.push(split);
        splits.push(split);
        compileNode(node.node, prog);
        if (prog.length > MAX_PROGRAM) throw new LinearRegexError('pattern too large (repeat counts expand it)');
      }
      for (const s of splits) s.b = prog.length;
      return;
    }
  }
}

function isWord(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || c === 95 || (c >= 97 && c <= 122);
}

function inRanges(ranges: readonly Range[], c: number): boolean {
  for (let i = 0; i < ranges.length; i++) {
    const r = ranges[i] as Range;
    if (c >= r[0] && c <= r[1]) return true;
  }
  return false;
}

/** Case-insensitive membership: the input is lower-cased, so its upper-case form is tried too. */
function setHas(set: CharSet, c: number): boolean {
  let has = inRanges(set.ranges, c);
  if (!has) {
    const upper = String.fromCharCode(c).toUpperCase();
    if (upper.length === 1 && upper.charCodeAt(0) !== c) has = inRanges(set.ranges, upper.charCodeAt(0));
  }
  return has !== set.negate;
}

function isLineTerminator(c: number): boolean {
  return c === 10 || c === 13 || c === 0x2028 || c === 0x2029;
}

export interface LinearRegex {
  readonly source: string;
  /** Whether the pattern matches anywhere in `lower`, which the caller has lower-cased. */
  test(lower: string): boolean;
}

/**
 * Compiles `pattern` once (per config generation); throws LinearRegexError for what the engine
 * refuses. The returned matcher runs in time linear in its input.
 */
export function compileLinear(pattern: string): LinearRegex {
  const prog: Inst[] = [];
  compileNode(new Parser(pattern).parse(), prog);
  prog.push({ op: MATCH, a: 0, b: 0 });
  const n = prog.length;
  // Thread lists as arrays of program counters; `mark` stamps a pc once per input position.
  let clist = new Int32Array(n);
  let nlist = new Int32Array(n);
  const mark = new Uint32Array(n);
  const stack = new Int32Array(n * 2 + 2);
  let stamp = 0;
  const nextStamp = (): void => {
    if (stamp === 0xffffffff) {
      mark.fill(0);
      stamp = 0;
    }
    stamp++;
  };

  function assertHolds(kind: string, s: string, pos: number): boolean {
    switch (kind) {
      case '^': return pos === 0;
      case '$': return pos === s.length;
      default: {
        const before = pos > 0 && isWord(s.charCodeAt(pos - 1));
        const after = pos < s.length && isWord(s.charCodeAt(pos));
        return (before !== after) === (kind === 'b');
      }
    }
  }

  /** Adds `pc` and everything reachable from it without input to `list`; true when MATCH is reached. */
  function add(list: Int32Array, count: number[], pc: number, s: string, pos: number): boolean {
    let sp = 0;
    stack[sp++] = pc;
    while (sp > 0) {
      const p = stack[--sp] as number;
      if (mark[p] === stamp) continue;
      mark[p] = stamp;
      const inst = prog[p] as Inst;
      switch (inst.op) {
        case JMP:
          stack[sp++] = inst.a;
          break;
        case SPLIT:
          stack[sp++] = inst.b;
          stack[sp++] = inst.a;
          break;
        case ASSERT:
          if (assertHolds(inst.kind as string, s, pos)) stack[sp++] = p + 1;
          break;
        case MATCH:
          return true;
        default:
          list[(count[0] as number)++] = p;
      }
    }
    return false;
  }

  return {
    source: pattern,
    test(s) {
      const ccount = [0];
      const ncount = [0];
      nextStamp();
      if (add(clist, ccount, 0, s, 0)) return true;
      for (let pos = 0; pos < s.length; pos++) {
        const c = s.charCodeAt(pos);
        nextStamp();
        ncount[0] = 0;
        for (let k = 0; k < (ccount[0] as number); k++) {
          const p = clist[k] as number;
          const inst = prog[p] as Inst;
          const ok = inst.op === CHAR ? inst.a === c : inst.op === SET ? setHas(inst.set as CharSet, c) : !isLineTerminator(c);
          if (ok && add(nlist, ncount, p + 1, s, pos + 1)) return true;
        }
        // Unanchored search: a new attempt starts at every position.
        if (add(nlist, ncount, 0, s, pos + 1)) return true;
        [clist, nlist] = [nlist, clist];
        ccount[0] = ncount[0];
      }
      return false;
    },
  };
}
