package report

import (
	"strings"
	"unicode"
)

// writeColumns writes rows as columns separated by gap spaces, padding every
// column but the last to its widest cell.
//
// It measures cells by the columns a terminal gives them, as text/tabwriter
// cannot: tabwriter counts runes, so the Chinese report's CJK characters,
// two columns wide each, would push every row out of line.
func writeColumns(b *strings.Builder, rows [][]string, gap int) {
	var widths []int
	for _, row := range rows {
		for i, c := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(c))
		}
	}
	for _, row := range rows {
		for i, c := range row {
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-displayWidth(c)+gap))
			}
		}
		b.WriteString("\n")
	}
}

// displayWidth is the number of terminal columns s takes: East Asian wide
// and full-width characters take two, combining marks none, the rest one.
func displayWidth(s string) int {
	w := 0
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Mn, r), r == '\u200b':
		case wide(r):
			w += 2
		default:
			w++
		}
	}
	return w
}

// wide reports whether r is East Asian Wide or Fullwidth (Unicode UAX #11),
// for the blocks a report can contain.
func wide(r rune) bool {
	switch {
	case r >= 0x1100 && r <= 0x115F, // Hangul Jamo
		r >= 0x2E80 && r <= 0x303E,   // CJK radicals, Kangxi, CJK symbols and punctuation
		r >= 0x3041 && r <= 0x33FF,   // kana, CJK compatibility
		r >= 0x3400 && r <= 0x4DBF,   // CJK extension A
		r >= 0x4E00 && r <= 0x9FFF,   // CJK unified ideographs
		r >= 0xA000 && r <= 0xA4CF,   // Yi
		r >= 0xAC00 && r <= 0xD7A3,   // Hangul syllables
		r >= 0xF900 && r <= 0xFAFF,   // CJK compatibility ideographs
		r >= 0xFE30 && r <= 0xFE4F,   // CJK compatibility forms
		r >= 0xFF00 && r <= 0xFF60,   // full-width forms
		r >= 0xFFE0 && r <= 0xFFE6,   // full-width signs
		r >= 0x20000 && r <= 0x3FFFD: // CJK extensions B and beyond
		return true
	}
	return false
}
