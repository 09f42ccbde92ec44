package report

import (
	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// labels are the words Render puts around a diagnosis, in one language.
type labels struct {
	status map[llmdiagv1.Status]string
	// lang is the language; causes are titled with diagnose.CauseName.
	lang       llmdiagv1.Language
	indicator  string
	statusCol  string
	conclusion string
	rootCause  string
	evidence   string
	ruledOut   string
	recs       string
	routable   string
	yes, no    string
	load       string
	confidence string
	observed   string
	stale      string
	// ago formats an age: "15 s ago", "15 秒前".
	ago func(age string) string
	// withValue joins a status word and a value: "OK (~30%)", "正常（~30%）".
	withValue func(status, value string) string
	// colon separates a label from its text: ": " or "：".
	colon string
	sep   string
}

// newLabels returns the labels for lang: Chinese, or English otherwise.
func newLabels(lang llmdiagv1.Language) labels {
	if lang == llmdiagv1.Language_LANGUAGE_ZH {
		return labels{
			lang: lang,
			status: map[llmdiagv1.Status]string{
				llmdiagv1.Status_STATUS_UNSPECIFIED: "未知",
				llmdiagv1.Status_STATUS_OK:          "正常",
				llmdiagv1.Status_STATUS_WARN:        "警告",
				llmdiagv1.Status_STATUS_CRIT:        "严重",
				llmdiagv1.Status_STATUS_UNKNOWN:     "未知",
				llmdiagv1.Status_STATUS_DOWN:        "宕机",
			},
			indicator:  "指标",
			statusCol:  "状态",
			conclusion: "结论",
			rootCause:  "根本原因",
			evidence:   "证据",
			ruledOut:   "已排除",
			recs:       "建议",
			routable:   "可路由",
			yes:        "是",
			no:         "否",
			load:       "负载",
			confidence: "置信度",
			observed:   "观测时间",
			stale:      "数据已过期",
			ago:        func(age string) string { return age + "前" },
			withValue:  func(s, v string) string { return s + "（" + v + "）" },
			colon:      "：",
			sep:        "，",
		}
	}
	return labels{
		lang: llmdiagv1.Language_LANGUAGE_EN,
		status: map[llmdiagv1.Status]string{
			llmdiagv1.Status_STATUS_UNSPECIFIED: "UNKNOWN",
			llmdiagv1.Status_STATUS_OK:          "OK",
			llmdiagv1.Status_STATUS_WARN:        "WARN",
			llmdiagv1.Status_STATUS_CRIT:        "CRIT",
			llmdiagv1.Status_STATUS_UNKNOWN:     "UNKNOWN",
			llmdiagv1.Status_STATUS_DOWN:        "DOWN",
		},
		indicator:  "Indicator",
		statusCol:  "Status",
		conclusion: "Conclusion",
		rootCause:  "Root cause",
		evidence:   "Evidence",
		ruledOut:   "Ruled out",
		recs:       "Recommendations",
		routable:   "Routable",
		yes:        "yes",
		no:         "no",
		load:       "Load",
		confidence: "Confidence",
		observed:   "Observed",
		stale:      "stale data",
		ago:        func(age string) string { return age + " ago" },
		withValue:  func(s, v string) string { return s + " (" + v + ")" },
		colon:      ": ",
		sep:        ", ",
	}
}

// cause titles cause c.
func (l labels) cause(c llmdiagv1.Cause) string { return diagnose.CauseName(c, l.lang) }
