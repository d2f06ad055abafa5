package felix_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The repository stands on its own: every document a comment, README or
// vector note cites is a file in the module (docs/NAME.md §N), and nothing
// points outside it. These tests read the module's files, not a network or a
// directory beside the checkout.

// repoFile is a text file of the module, by its slash path from the root.
type repoFile struct {
	path string
	text string
}

// citedExts are the files whose text is checked. .ci/run is named in full.
var citedExts = map[string]bool{".go": true, ".md": true, ".txt": true, ".py": true, ".json": true, ".sh": true, ".mod": true}

// repoFiles lists the tracked text files (git ls-files) or, outside a git
// checkout (CI tests a plain copy of the tree), every file under the root
// except .git.
func repoFiles(t *testing.T) []repoFile {
	t.Helper()
	var names []string
	if out, err := exec.Command("git", "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		for _, n := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
			names = append(names, string(n))
		}
	} else {
		err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == ".git" {
					return filepath.SkipDir
				}
				return nil
			}
			names = append(names, filepath.ToSlash(p))
			return nil
		})
		require.NoError(t, err)
	}
	var files []repoFile
	for _, n := range names {
		if !citedExts[path.Ext(n)] && n != ".ci/run" {
			continue
		}
		b, err := os.ReadFile(filepath.FromSlash(n))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		require.NoError(t, err)
		if bytes.IndexByte(b, 0) >= 0 {
			continue
		}
		files = append(files, repoFile{n, string(b)})
	}
	require.Greater(t, len(files), 100, "the module's files were not found: run the test from the module root")
	return files
}

// upstreamFile reports files copied from upstream (its vectors), whose text
// is upstream's and is not held to this repository's citation style.
func upstreamFile(p string) bool { return strings.HasPrefix(p, "vectors/upstream/") }

var (
	// A repo-relative document path: docs/binary.md, vectors/FORMAT.md, ...
	// optionally followed by sections: "§6", "§7–§8", "§7/§8", "§1, §3".
	citeRe = regexp.MustCompile(`((?:\.\./)*(?:docs|vectors|fuzz|examples|conn|client|cmd|conformance|internal)/(?:[\w.-]+/)*[\w.-]+\.md)((?:'s)?(?:\s*[–/,-]?\s*§\d+(?:\.\d+)*)*)`)
	// A bare protocol document name, as the documents in docs/ cite each other.
	bareRe    = regexp.MustCompile(`([a-z-]+\.md)((?:'s)?(?:\s*[–/,-]?\s*§\d+(?:\.\d+)*)*)`)
	sectionRe = regexp.MustCompile(`§(\d+(?:\.\d+)*)`)
	headingRe = regexp.MustCompile(`^#+\s+(\d+(?:\.\d+)*)\.?\s`)
	// A markdown link target: [text](target).
	linkRe = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	// "docs/README.md open question N".
	questionRe = regexp.MustCompile(`docs/README\.md open question (\d+)`)
)

// protocolDocs are the documents of docs/ (bare names inside docs/).
func protocolDocs(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("docs")
	require.NoError(t, err)
	m := map[string]bool{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".md") {
			m[e.Name()] = true
		}
	}
	return m
}

// sections returns the numbered headings of a markdown file ("6", "4.1").
func sections(t *testing.T, cache map[string]map[string]bool, file string) map[string]bool {
	t.Helper()
	if s, ok := cache[file]; ok {
		return s
	}
	s := map[string]bool{}
	b, err := os.ReadFile(filepath.FromSlash(file))
	if err == nil {
		fence := false
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "```") {
				fence = !fence
			}
			if m := headingRe.FindStringSubmatch(line); m != nil && !fence {
				s[m[1]] = true
			}
		}
	}
	cache[file] = s
	return s
}

// openQuestions counts the numbered items of docs/README.md's open questions.
func openQuestions(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("docs", "README.md"))
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(b), "## Open questions")
	require.True(t, ok, "docs/README.md has no Open questions section")
	m := map[string]bool{}
	for _, line := range strings.Split(after, "\n") {
		if n, _, ok := strings.Cut(line, ". "); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			m[n] = true
		}
	}
	return m
}

func exists(p string) bool {
	_, err := os.Stat(filepath.FromSlash(p))
	return err == nil
}

// lineOf is the 1-based line of byte offset i.
func lineOf(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

// TestDocCitationsResolve: every docs/NAME.md (and other repo-relative .md
// path) named anywhere exists, with every §N given as a numbered heading
// of it; inside docs/ bare sibling names (a "NAME.md §N" in docs/frame.md)
// resolve the same way;
// every relative markdown link names an existing file or directory; every
// "docs/README.md open question N" exists.
func TestDocCitationsResolve(t *testing.T) {
	docs := protocolDocs(t)
	cache := map[string]map[string]bool{}
	questions := openQuestions(t)
	var bad []string
	check := func(f repoFile, at int, target, secs string) {
		where := f.path + ":" + itoa(lineOf(f.text, at))
		if !exists(target) {
			bad = append(bad, where+": "+target+" does not exist")
			return
		}
		for _, m := range sectionRe.FindAllStringSubmatch(secs, -1) {
			if !sections(t, cache, target)[m[1]] {
				bad = append(bad, where+": "+target+" has no section §"+m[1])
			}
		}
	}
	n := 0
	for _, f := range repoFiles(t) {
		if upstreamFile(f.path) {
			continue
		}
		for _, m := range citeRe.FindAllStringSubmatchIndex(f.text, -1) {
			p := f.text[m[2]:m[3]]
			if strings.Contains(p, "NAME.md") {
				continue // the citation form itself, as the docs describe it
			}
			target := p
			if strings.HasPrefix(p, "../") {
				target = path.Join(path.Dir(f.path), p)
			}
			check(f, m[0], target, f.text[m[4]:m[5]])
			n++
		}
		if strings.HasPrefix(f.path, "docs/") {
			for _, m := range bareRe.FindAllStringSubmatchIndex(f.text, -1) {
				if m[2] > 0 && strings.ContainsAny(f.text[m[2]-1:m[2]], "/.[_") {
					continue // part of a path or link text, checked elsewhere
				}
				name := f.text[m[2]:m[3]]
				if !docs[name] {
					continue
				}
				check(f, m[0], "docs/"+name, f.text[m[4]:m[5]])
				n++
			}
		}
		if strings.HasSuffix(f.path, ".md") {
			for _, m := range linkRe.FindAllStringSubmatchIndex(f.text, -1) {
				target := f.text[m[2]:m[3]]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				if !exists(path.Join(path.Dir(f.path), target)) {
					bad = append(bad, f.path+":"+itoa(lineOf(f.text, m[0]))+": link target "+target+" does not exist")
				}
				n++
			}
		}
		for _, m := range questionRe.FindAllStringSubmatchIndex(f.text, -1) {
			if q := f.text[m[2]:m[3]]; !questions[q] {
				bad = append(bad, f.path+":"+itoa(lineOf(f.text, m[0]))+": docs/README.md has no open question "+q)
			}
		}
	}
	require.Greater(t, n, 100, "too few citations found: the patterns are broken")
	require.Empty(t, bad, "citations that do not resolve:\n%s", strings.Join(bad, "\n"))
}

// TestDocIndexComplete: docs/README.md has an index row linking every
// document of docs/.
func TestDocIndexComplete(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("docs", "README.md"))
	require.NoError(t, err)
	for name := range protocolDocs(t) {
		if name == "README.md" {
			continue
		}
		require.Contains(t, string(b), "| ["+name+"]("+name+") |", "docs/README.md has no index row for %s", name)
	}
}

// TestReadmeClientExample: the README's first Go example is
// client/hello_test.go (TestHello, which go test compiles and runs), so the
// quick start cannot rot. Comments, indentation and the package clause are
// ignored.
func TestReadmeClientExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(readme), "```go\n")
	require.True(t, ok, "README.md has no Go example")
	snippet, _, ok := strings.Cut(after, "```")
	require.True(t, ok)
	ex, err := os.ReadFile(filepath.Join("client", "hello_test.go"))
	require.NoError(t, err)
	noPackage := func(lines []string) []string {
		return slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "package ") })
	}
	require.Equal(t, noPackage(codeLines(string(ex))), noPackage(codeLines(snippet)), "README.md's first example differs from client/hello_test.go")
}

// TestReadmeAPIExample: the README's example of package api is a
// contiguous part of api's Example_client (api/example_client_test.go),
// which go test compiles and runs. Comments and indentation are ignored.
func TestReadmeAPIExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "### Every other request: the client's typed calls")
	require.True(t, ok, "README.md has no api section")
	_, after, ok := strings.Cut(section, "```go\n")
	require.True(t, ok, "README.md's api section has no Go example")
	snippet, _, ok := strings.Cut(after, "```")
	require.True(t, ok)
	ex, err := os.ReadFile(filepath.Join("api", "example_client_test.go"))
	require.NoError(t, err)
	_, body, ok := strings.Cut(string(ex), "func Example_client() {\n")
	require.True(t, ok, "api.Example_client not found")
	want, got := codeLines(snippet), codeLines(body)
	require.NotEmpty(t, want)
	for i := range got {
		if i+len(want) <= len(got) && slices.Equal(got[i:i+len(want)], want) {
			return
		}
	}
	t.Fatalf("README.md's api example is not part of api.Example_client:\n%s", strings.Join(want, "\n"))
}

// codeLines returns the Go lines of s without comments and indentation.
func codeLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l, _, _ = strings.Cut(l, "//")
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestDocCitationPatterns forbids citations of documents that are not in
// the module (the older forms that named a directory outside it, with a
// slash or a section sign after the word, and bare protocol document names
// outside docs/) and any path to a directory beside the
// checkout. The forbidden strings are built here so that this file does
// not contain them.
func TestDocCitationPatterns(t *testing.T) {
	outside := []string{".." + "/shared", "/work" + "/shared", "/work" + "/wt/"}
	spec := "sp" + "ec"
	old := regexp.MustCompile(`\b` + spec + `(?:/[\w.-]|\s+§|\s+[a-z-]+\.md)`)
	docs := protocolDocs(t)
	var bad []string
	for _, f := range repoFiles(t) {
		for _, s := range outside {
			if i := strings.Index(f.text, s); i >= 0 {
				bad = append(bad, f.path+":"+itoa(lineOf(f.text, i))+": names a path outside the repository")
			}
		}
		if upstreamFile(f.path) {
			continue
		}
		for _, m := range old.FindAllStringIndex(f.text, -1) {
			bad = append(bad, f.path+":"+itoa(lineOf(f.text, m[0]))+": old-style citation "+strings.TrimSpace(f.text[m[0]:m[1]])+" (cite docs/NAME.md §N)")
		}
		if strings.HasPrefix(f.path, "docs/") {
			continue
		}
		for _, m := range bareRe.FindAllStringSubmatchIndex(f.text, -1) {
			name := f.text[m[2]:m[3]]
			if !docs[name] || name == "README.md" {
				continue
			}
			if m[2] > 0 && strings.ContainsAny(f.text[m[2]-1:m[2]], "/[_.") {
				continue // docs/NAME.md, a link text or another path
			}
			bad = append(bad, f.path+":"+itoa(lineOf(f.text, m[0]))+": bare "+name+" (cite docs/"+name+")")
		}
	}
	require.Empty(t, bad, "%s", strings.Join(bad, "\n"))
}

func itoa(n int) string { return strconv.Itoa(n) }
