// Package docs holds the tests that keep the repository's Markdown honest:
// every relative link in README.md, CONTRIBUTING.md and docs/*.md reaches a
// file that exists and, with a #fragment, a heading of that file under
// GitHub's anchor rules; README.md stays an entrance of at most 300 lines;
// and README.md and docs/ describe the system as it is, without references
// to the issues it was built in.
//
// The pages link into each other by anchor, and a heading renamed or moved
// to another page breaks those links silently on GitHub, so they are checked
// here, without engines, like any other test. A page that names what the
// code defines (docs/configuration.md) is checked against the code. The
// package ships nothing.
package docs
