/* Secrets kept off disk (tr_core.h, "redaction"): every value the shim
 * writes from the environment or the command line passes through here
 * first, in the process, so no trace, ring or marker ever holds one.
 *
 * Three rules, each erring on the side of hiding:
 *  - a variable or option whose name looks secret: the name split at '_',
 *    '-' and '.' into words, one of which is, or ends with, a secret word
 *    (KEY, TOKEN, SECRET, PASS...: g_words), unless the whole name is on
 *    the allow-list of known harmless names (NCCL_IB_PKEY: a partition
 *    key), or the name matches a TRSHIM_REDACT pattern (comma-separated
 *    fnmatch globs, case-insensitive, for names the rules miss);
 *  - credentials inside a URL in any value (scheme://user:password@host:
 *    the user and password go), and query parameters with secret names;
 *  - token-shaped words in any value: a known prefix (hf_, ghp_, sk-,
 *    xoxb-, AKIA...) followed by a long run of token characters, and
 *    whatever follows "Bearer " or "Basic ".
 * A redacted part reads "<redacted>". */
#include <ctype.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tr_core.h"

static const char *const g_words[] = {"KEY",     "KEYS",       "TOKEN",  "TOKENS",  "SECRET",    "SECRETS",
                                      "PASS",    "PASSWD",     "PASSWORD", "PASSPHRASE", "PWD",   "AUTH",
                                      "AUTHORIZATION", "CREDENTIAL", "CREDENTIALS", "CREDS", "COOKIE", "SESSION",
                                      "PRIVATE", "SIGNATURE",  "CERT",   "APIKEY"};
/* words that are secret only as a whole word, not as a word's end
 * (BYPASS, COMPASS; "KEY" ends PKEY, which the allow-list covers) */
static const char *const g_whole_only[] = {"PASS", "PWD", "AUTH", "SESSION", "PRIVATE", "CERT", "CREDS"};
static const char *const g_allowed[] = {"NCCL_IB_PKEY", "UCX_IB_PKEY", "FI_EFA_USE_DEVICE_RDMA",
                                        "NCCL_IB_PCI_RELAXED_ORDERING"};
/* token prefixes of well-known services: a prefix then >= 16 token characters */
static const char *const g_token_prefixes[] = {"hf_", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "glpat-",
                                               "sk-", "xoxb-", "xoxp-", "xoxa-", "AKIA", "ASIA", "wandb_"};

#define MAX_PATTERNS 32
static char *g_patterns[MAX_PATTERNS];
static int g_npatterns;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_patterns(void)
{
    const char *v = getenv("TRSHIM_REDACT");
    if (!v || !*v) return;
    char *copy = strdup(v), *save = NULL;
    if (!copy) return;
    for (char *p = strtok_r(copy, ",", &save); p && g_npatterns < MAX_PATTERNS; p = strtok_r(NULL, ",", &save)) {
        while (*p == ' ') p++;
        if (*p && (g_patterns[g_npatterns] = strdup(p))) g_npatterns++;
    }
    free(copy);
}

static int word_is(const char *w, size_t n, const char *word) { return strlen(word) == n && !strncasecmp(w, word, n); }

static int ends_with(const char *w, size_t n, const char *word)
{
    size_t l = strlen(word);
    return n > l && !strncasecmp(w + n - l, word, l);
}

static int secret_word(const char *w, size_t n)
{
    for (size_t i = 0; i < sizeof g_words / sizeof g_words[0]; i++) {
        if (word_is(w, n, g_words[i])) return 1;
        int whole_only = 0;
        for (size_t k = 0; k < sizeof g_whole_only / sizeof g_whole_only[0] && !whole_only; k++)
            whole_only = !strcmp(g_words[i], g_whole_only[k]);
        if (!whole_only && ends_with(w, n, g_words[i])) return 1;
    }
    return 0;
}

int tr_redact_name(const char *name, size_t len)
{
    pthread_once(&g_once, read_patterns);
    char buf[256];
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, name, len);
    buf[len] = 0;
    for (int i = 0; i < g_npatterns; i++)
        if (fnmatch(g_patterns[i], buf, FNM_CASEFOLD) == 0) return 1;
    for (size_t i = 0; i < sizeof g_allowed / sizeof g_allowed[0]; i++)
        if (!strcasecmp(buf, g_allowed[i])) return 0;
    for (size_t i = 0; i < len;) {
        while (i < len && (buf[i] == '_' || buf[i] == '-' || buf[i] == '.')) i++;
        size_t s = i;
        while (i < len && buf[i] != '_' && buf[i] != '-' && buf[i] != '.') i++;
        if (i > s && secret_word(buf + s, i - s)) return 1;
    }
    return 0;
}

/* ---- values ------------------------------------------------------------------------ */

static int token_char(int c) { return isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~' || c == '+' || c == '/' || c == '='; }

/* appends s[0..n) to the output buffer (always room: out has the value's
 * size + a margin per redaction, see tr_redact_value) */
typedef struct {
    char *p;
    size_t len, cap;
} outbuf;

static void put(outbuf *o, const char *s, size_t n)
{
    if (o->len + n >= o->cap) {
        size_t cap = (o->len + n + 1) * 2;
        char *grown = realloc(o->p, cap);
        if (!grown) return;
        o->p = grown;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = 0;
}

static const char REDACTED[] = "<redacted>";

/* at s: a known token prefix followed by >= 16 token characters: its length, else 0 */
static size_t token_at(const char *s)
{
    for (size_t i = 0; i < sizeof g_token_prefixes / sizeof g_token_prefixes[0]; i++) {
        size_t pl = strlen(g_token_prefixes[i]);
        if (strncmp(s, g_token_prefixes[i], pl) != 0) continue;
        size_t n = pl;
        while (s[n] && (isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == '-')) n++;
        if (n - pl >= 16) return n;
    }
    return 0;
}

/* "Bearer xyz", "Basic xyz" at s (case-insensitive): the length of the scheme and its space, else 0 */
static size_t auth_scheme_at(const char *s)
{
    static const char *const schemes[] = {"Bearer ", "Basic ", "Token "};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (!strncasecmp(s, schemes[i], strlen(schemes[i]))) return strlen(schemes[i]);
    return 0;
}

/* at s, "scheme://": the offset of the user info's end ('@') when the
 * authority holds one, else 0; *start set to the authority's start */
static size_t userinfo_at(const char *s, size_t *start)
{
    const char *sep = strstr(s, "://");
    if (!sep || sep == s) return 0;
    for (const char *q = s; q < sep; q++)
        if (!isalnum((unsigned char)*q) && *q != '+' && *q != '-' && *q != '.') return 0;
    const char *auth = sep + 3;
    size_t n = strcspn(auth, "/?# \t\"'");
    const char *at = memrchr(auth, '@', n);
    if (!at) return 0;
    *start = (size_t)(auth - s);
    return (size_t)(at - s);
}

char *tr_redact_value(const char *v)
{
    outbuf o = {malloc(strlen(v) + 64), 0, strlen(v) + 64};
    if (!o.p) return NULL;
    o.p[0] = 0;
    size_t i = 0, n = strlen(v);
    int word_start = 1;
    while (i < n) {
        size_t start, at, k;
        if (word_start && (k = token_at(v + i))) {
            put(&o, REDACTED, sizeof REDACTED - 1);
            i += k;
        } else if (word_start && (k = auth_scheme_at(v + i)) && token_char((unsigned char)v[i + k])) {
            put(&o, v + i, k);
            put(&o, REDACTED, sizeof REDACTED - 1);
            i += k;
            while (i < n && token_char((unsigned char)v[i])) i++;
        } else if (word_start && (at = userinfo_at(v + i, &start))) {
            put(&o, v + i, start);
            put(&o, REDACTED, sizeof REDACTED - 1);
            i += at;            /* the '@' and what follows stay */
        } else if ((v[i] == '?' || v[i] == '&') && i + 1 < n) {
            /* a query parameter: name=value, the value hidden when the name looks secret */
            size_t nl = strcspn(v + i + 1, "=&# ");
            put(&o, v + i, 1 + nl);
            i += 1 + nl;
            if (v[i] == '=' && tr_redact_name(v + i - nl, nl)) {
                put(&o, "=", 1);
                put(&o, REDACTED, sizeof REDACTED - 1);
                i += 1 + strcspn(v + i + 1, "&# ");
            }
            word_start = 0;
            continue;
        } else {
            put(&o, v + i, 1);
            i++;
        }
        word_start = i < n && !isalnum((unsigned char)v[i - 1]) && v[i - 1] != '_' && v[i - 1] != '-';
    }
    return o.p;
}

/* ---- a command line ------------------------------------------------------------------ */

/* an option's name: "--api-key=X" -> "api-key" (len), NULL when arg is no option */
static const char *option_name(const char *arg, size_t *len)
{
    if (arg[0] != '-' || !arg[1] || isdigit((unsigned char)arg[1])) return NULL;
    const char *name = arg + (arg[1] == '-' ? 2 : 1);
    *len = strcspn(name, "=");
    return *len ? name : NULL;
}

void tr_redact_argv(char **argv, int argc)
{
    for (int i = 0; i < argc; i++) {
        size_t nl;
        const char *name = option_name(argv[i], &nl);
        if (name && tr_redact_name(name, nl)) {
            char *eq = strchr(argv[i], '=');
            if (eq) {
                /* --token=X: the value goes */
                size_t keep = (size_t)(eq - argv[i]) + 1;
                char *r = malloc(keep + sizeof REDACTED);
                if (r) {
                    memcpy(r, argv[i], keep);
                    memcpy(r + keep, REDACTED, sizeof REDACTED);
                    free(argv[i]);
                    argv[i] = r;
                }
            } else if (i + 1 < argc && argv[i + 1][0] != '-') {
                /* --password X: the next word goes */
                char *r = strdup(REDACTED);
                if (r) {
                    free(argv[i + 1]);
                    argv[i + 1] = r;
                }
                i++;
            }
            continue;
        }
        char *r = tr_redact_value(argv[i]);
        if (r) {
            free(argv[i]);
            argv[i] = r;
        }
    }
}
