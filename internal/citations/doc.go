// Package citations keeps llmdiag's shipped text pointing only at what
// ships: comments, help text, YAML and Markdown may cite files of this
// repository, never the notes it was designed from, and say what the code
// does, never how it was made. Check reports every reference that does not
// resolve inside the repository, and every phrase of history; its test runs
// it over the whole tree, so either fails `make test`.
//
// What Check reports, in the files it reads (.go, .proto, .md, .yaml,
// .yml, .sh, the console's .js, .html and .css, and Makefiles; hidden
// directories and bin/ are skipped):
//
//   - a path out of the repository into a sibling checkout ("../shared/…"),
//     or an absolute one into the workspace it was developed in;
//   - a file name from the design notes (the design brief, the metric
//     reference, the seed document), unless a file of that name is in the
//     repository;
//   - "seed document", which names a document that does not ship: the
//     worked example it held is docs/verdict-rules.md;
//   - a phrase that tells how the text was made rather than what the code
//     does (History): an issue or pull request number, a round of work, a
//     faster or slower development machine, a work session's number, a
//     commit cited as history;
//   - a mention of a page docs/NAME.md that does not exist;
//   - in Markdown, a relative link whose file does not exist, or whose
//     #fragment names no heading of the linked page.
//
// Links with a scheme (https:, mailto:) are not followed: the check is
// offline and deterministic.
package citations
