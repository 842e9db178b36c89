"""The Slack adapter: the only part of citebot that talks to Slack."""
