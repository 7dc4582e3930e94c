/**
 * The WAF's built-in pattern families (spec/3 §2.5 waf.sqli / xss / path_traversal / rce and
 * scanner_block). Each family is one alternation compiled once with the `i` flag and run by V8 on
 * input percent-decoded once. They are written to stay linear on V8's backtracking engine: every
 * quantifier is over a class disjoint from what follows it or bounded (`{0,200}`), and no
 * quantified group holds another quantifier that could match the same text (waf.test.ts runs
 * each family over large adversarial inputs to hold that). The inspected input is capped too
 * (max_uri_bytes, body_inspect_bytes).
 *
 * Two variants per family: `url` for the request target, where structure tells a payload from
 * text, and `body`, stricter, since form and JSON bodies carry free text such as blog posts with
 * code in them (`import x from '../../lib'`, `cd app && npm test`).
 */

export type Family = 'sqli' | 'xss' | 'path_traversal' | 'rce';

export interface FamilyPatterns {
  url: RegExp;
  body: RegExp;
}

function re(parts: readonly string[]): RegExp {
  return new RegExp(parts.join('|'), 'i');
}

// SQL injection: quote-breaking tautologies, UNION SELECT, stacked queries, time-based probes,
// schema discovery, comment tricks. Plain `SELECT … FROM … WHERE` text is not a signal.
const SQLI = [
  String.raw`['"\x60](?:\s*\))?\s*(?:or|and|xor|\|\||&&)\s+(?:\(?['"][\w@.]*['"]?|\(?[\w@.]+)\s*(?:=|<>|!=|<|>|\blike\b|\brlike\b|\bregexp\b|\bis\s+not\b|\bbetween\b)`,
  String.raw`['"]\s*(?:or|and)\s+(?:true|false|not\s+false)\s*(?:--|#|/\*|;|$|\)|&)`,
  String.raw`\b\d+['")]*\s*(?:and|or|xor)\s+\d+\s*(?:=|<>|!=|<|>)\s*\d+`,
  String.raw`\bunion[\s/*+(]+(?:all[\s/*+(]+|distinct[\s/*+(]+)?select\b`,
  String.raw`\bselect\b[^;]{0,120}?\bfrom[\s/*+]+(?:information_schema|mysql\.(?:user|db)|pg_(?:catalog|shadow|user)|sys(?:objects|columns|users)\b|sqlite_master|all_tables|dual\b)`,
  String.raw`(?:[,'"()]|\b(?:and|or|xor|select|if|then|when)\b)\s*(?:sleep|pg_sleep|benchmark)\s*\(\s*\d`,
  String.raw`\bwaitfor\s+(?:delay|time)\s+['"]`,
  String.raw`\b(?:load_file|extractvalue|updatexml|utl_inaddr\.get_host_address|utl_http\.request|sp_oacreate|sp_executesql|dbms_pipe\.receive_message)\s*\(`,
  String.raw`\bxp_cmdshell\b|\binto\s+(?:out|dump)file\b|@@(?:version|datadir|basedir|hostname|servername)\b`,
  String.raw`;\s*(?:drop\s+(?:table|database|schema)\b|truncate\s+table\b|shutdown\b|exec(?:ute)?\s+(?:xp_|sp_|master\.)|declare\s+@)`,
  String.raw`['")]\s*;\s*(?:insert\s+into|delete\s+from|update\s+\w+\s+set)\b`,
  String.raw`['"]\s*(?:--[\s-]*|#\s*)(?:$|[&"])`,
  String.raw`/\*!\d*\s*(?:select|union|and|or|insert|update|delete|drop)\b`,
  String.raw`\border\s+by\s+\d+\s*(?:--|#)`,
  String.raw`(?:\b(?:and|or|xor|not)|=)\s*\(\s*select\b`,
  String.raw`\bchar\s*\(\s*\d+\s*(?:,\s*\d+\s*){2,}\)`,
];

// Cross-site scripting: script-capable tags, event handlers inside a tag or breaking out of an
// attribute, script URLs in attributes or on their own. Ordinary rich text (<p>, <a href>, <img
// src>) and words like "JavaScript: the good parts" are not signals.
const EVENTS = String.raw`on(?:error|load|unload|abort|mouse[a-z]{2,10}|pointer[a-z]{2,10}|key(?:up|down|press)|focus(?:in|out)?|blur|click|dblclick|contextmenu|submit|change|input|invalid|reset|select|toggle|animation[a-z]{3,10}|transition[a-z]{3,10}|drag[a-z]{0,10}|drop|copy|cut|paste|scroll|wheel|resize|hashchange|pageshow|popstate|message|begin|end|start|finish|beforeprint|afterprint|show|auxclick|touch[a-z]{3,10})\s*=`;
const XSS = [
  String.raw`<\/?script\b`,
  String.raw`<(?:frame|frameset|object|embed|applet|base|meta)\b`,
  String.raw`<[a-z][a-z0-9:-]{0,20}[\s/](?:[^>]{0,300}?[\s/"'])?on[a-z]{3,30}\s*=`,
  String.raw`["'\x60](?:[^<>"'\x60=]{0,100}?[\s/])?${EVENTS}`,
  String.raw`\b(?:href|src|action|formaction|data|xlink:href|background|lowsrc|dynsrc)\s*=\s*(?:['"\x60]\s*)?(?:javascript|vbscript|livescript|data\s*:\s*text/html)`,
  String.raw`(?:javascript|vbscript|livescript)\s*:\s*(?://[^\n]{0,100}\n\s*)?[\w$.\[\]'"]{0,100}\s*[(\x60=]`,
  String.raw`\bdata\s*:\s*text/html\b|\bsrcdoc\s*=|style\s*=[^>]{0,200}?(?:expression\s*\(|-moz-binding|behavior\s*:)`,
];

// Path traversal: dot-dot segments and sensitive system files. In the URL a `..` segment is
// enough (clients resolve dot segments before sending); in bodies only traversal towards system
// directories, deep traversal, or a value that is a system file.
const SENSITIVE_FILE = String.raw`(?:[a-z]:)?[/\\]+(?:etc[/\\]+(?:passwd|shadow|group|hosts|issue|crontab|sudoers)\b|proc[/\\]+self[/\\]|windows[/\\]+(?:win\.ini|system32))`;
const TRAVERSAL_URL = [
  String.raw`(?:^|[/\\=&?])\.\.(?:[/\\;]|$)`,
  String.raw`(?:^|[=&?"'])${SENSITIVE_FILE}`,
  String.raw`\bboot\.ini\b|\x00|\xc0[\xae\xaf]`,
];
const TRAVERSAL_BODY = [
  String.raw`(?:\.\.[/\\]){1,20}(?:etc|proc|windows|winnt|system32|boot\.ini|root)\b`,
  String.raw`(?:\.\.[/\\]){4}`,
  String.raw`(?:^|[=&"])${SENSITIVE_FILE}`,
  String.raw`\x00|\xc0[\xae\xaf]`,
];

// Remote code execution: shell metacharacters followed by commands, command substitution,
// Log4Shell lookups, template and expression-language injection, interpreter one-liners.
const SEP = String.raw`(?:[;|\x60]|&&|\|\||\$\()`;
const RCE_COMMON = [
  String.raw`${SEP}\s*(?:id|whoami|uname(?:\s+-[a-z]{1,5})?|ifconfig|ipconfig|hostname|pwd|netstat(?:\s+-[a-z]{1,5})?|printenv|systeminfo|tasklist|ver)\s*(?:$|[;|\x60&#)"'])`,
  String.raw`${SEP}\s*(?:cat|head|tail|more|less|nl|type)\s+(?:/etc/|/proc/|[^\s;|&]{0,100}\.\./)`,
  String.raw`${SEP}\s*(?:nc|ncat|netcat|telnet)\s+(?:-[a-z]{1,5}\s+){0,4}(?:-e\s|(?:\d{1,3}\.){3}\d{1,3})`,
  String.raw`${SEP}\s*(?:/usr)?/bin/(?:ba|z|da|k|c)?sh\b`,
  String.raw`${SEP}\s*(?:ba|z|da|k|c)?sh\s+-[ci]\b|/dev/(?:tcp|udp)/\d`,
  String.raw`${SEP}\s*(?:python[0-9.]{0,4}|perl|ruby|php|node)\s+-[ecr]\s`,
  String.raw`${SEP}\s*sleep\s+\d{1,3}\s*(?:$|[;|\x60&#)])`,
  String.raw`\$\(\s*(?:id|whoami|uname)\s*\)`,
  String.raw`\$\{\s*(?:jndi\s*:|(?:lower|upper)\s*:|::-)`,
  String.raw`\{\{[^}]{0,100}__(?:class|globals|builtins|subclasses|import|mro)__|#_memberaccess|class\.module\.classloader|@java\.lang\.`,
  String.raw`(?:[;|&]|&&)\s*(?:cmd(?:\.exe)?\s+/c\b|powershell(?:\.exe)?\s+-(?:e|enc|encodedcommand|nop|c|command)\b)`,
  String.raw`\beval\s*\(\s*(?:base64_decode|gzinflate|str_rot13|gzuncompress)\s*\(`,
];
const RCE_URL = [
  ...RCE_COMMON,
  String.raw`${SEP}\s*(?:curl|wget|fetch)\s+\S`,
  String.raw`\$\(\s*(?:cat|ls|sleep|curl|wget|nslookup|ping|echo|bash|sh)\b|\x60\s*(?:id|whoami|uname(?:\s+-a)?|pwd)\s*\x60`,
  String.raw`<\?php\b|\b(?:shell_exec|passthru|proc_open|popen|pcntl_exec)\s*\(|\bjava\.lang\.(?:runtime|processbuilder)\b|\.getruntime\s*\(\s*\)|\brequire\s*\(\s*['"]child_process`,
];

/** Compiles the families; runs once at module load (the patterns never change). */
export const FAMILIES: Readonly<Record<Family, FamilyPatterns>> = {
  sqli: { url: re(SQLI), body: re(SQLI) },
  xss: { url: re(XSS), body: re(XSS) },
  path_traversal: { url: re(TRAVERSAL_URL), body: re(TRAVERSAL_BODY) },
  rce: { url: re(RCE_URL), body: re(RCE_COMMON) },
};

/**
 * Lookups and shellshock in any header value (they are delivered in User-Agent, Referer,
 * X-Api-Version…); part of the rce family. Values are joined with newlines. Every match contains
 * a `{` (waf.ts skips values without one): keep it so when adding alternatives.
 */
export const HEADER_RCE = /\$\{\s*(?:jndi\s*:|(?:lower|upper)\s*:|::-)|(?:^|\n)[ \t]*\(\s*\)\s*\{/i;

/** User agents of vulnerability scanners and attack tools (rule `scanner`). */
export const SCANNER_UA = new RegExp(
  String.raw`\b(?:sqlmap|nikto|nuclei|masscan|zgrab|nmap|acunetix|netsparker|invicti|wpscan|dirbuster|gobuster|dirb|ffuf|wfuzz|feroxbuster|w3af|openvas|nessus|arachni|skipfish|whatweb|jaeles|havij|commix|xsstrike|paros|webinspect|appscan|fimap|zmeu|morfeus|censysinspect|l9explore|l9tcpid|owasp[ _-]?zap|zaproxy|burp(?:suite|collaborator)?|sqlninja|bsqlbf|pangolin|joomscan|droopescan|cmsmap|xspider|httprint|hydra|dotdotpwn|vega/|webshag|grendel-scan|qualys|detectify|interactsh|projectdiscovery)\b|acunetix|netsparker|fuzz faster u fool`,
  'i',
);
