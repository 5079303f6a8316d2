"""Text a visitor may control, shown literally.

Streamlit renders Markdown in messages, captions, metric labels and values, spinners and progress
text: a link, an image, colour directives and icon codes, and (GitHub's extension) bare addresses
such as ``http://...``, ``www....`` and ``name@host`` made into links. A value the visitor chose (a URL
parameter, a model's name, an uploaded file's name, an error message that quotes them) goes through
:func:`literal` first, so a crafted link shows its characters and nothing else.
"""

import re

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character Markdown may read
# Where GitHub's autolinks begin: a scheme's colon, "www.", an e-mail's "@". Escaping does not stop them (they are
# found in the text after escapes are resolved); an invisible word joiner there does.
_AUTOLINK = re.compile(r"(?<=[A-Za-z])(?=:)|(?<=[Ww]{3})(?=\.)|(?=@)")
WORD_JOINER = "\u2060"


def literal(text: object) -> str:
    """``text`` as Markdown that shows it as written: every ASCII punctuation character backslash-escaped
    (CommonMark lets any be), and a word joiner (U+2060, invisible) where an autolink would begin, so there is
    no link, image, HTML, emphasis, directive or bare-address link."""
    return _PUNCTUATION.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER, str(text)))
