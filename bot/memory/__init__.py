"""What citebot remembers between turns: conversation state and the turn log."""
