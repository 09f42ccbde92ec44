// Package report renders a diagnosis for people: Markdown for chat tools
// (a heading, the table of findings, then the root cause with
// its evidence, what was ruled out and what to do) and aligned plain text for
// terminals, with the same content. Neither uses HTML.
//
// The diagnosis already carries its findings, summary and evidence in the
// language it was made in; Render adds only the labels around them, so
// render in the language the diagnosis was made in.
package report
