"""Names a page shows that a source or a user chose (a job's name, its user, its key): isolated from the text
around them, and their explicit direction controls shown.

`{{ job.name|isolated }}` is the name escaped in a `<bdi>` (Unicode bidi isolation: a right-to-left name does not
reorder the words beside it); inside it, each explicit embedding, override or isolate control (U+202A-U+202E,
U+2066-U+2069) is shown as a small visible mark: "invoice<U+202E>gnp.exe" reads as "invoice[RLO]gnp.exe", not as
"invoiceexe.png"."""

from __future__ import annotations

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

DIRECTION_CONTROLS = {
    "\u202a": ("LRE", "left-to-right embedding"),
    "\u202b": ("RLE", "right-to-left embedding"),
    "\u202c": ("PDF", "pop directional formatting"),
    "\u202d": ("LRO", "left-to-right override"),
    "\u202e": ("RLO", "right-to-left override"),
    "\u2066": ("LRI", "left-to-right isolate"),
    "\u2067": ("RLI", "right-to-left isolate"),
    "\u2068": ("FSI", "first strong isolate"),
    "\u2069": ("PDI", "pop directional isolate"),
}


@register.filter(is_safe=True)
def isolated(value: object) -> SafeString:
    """The value escaped in a <bdi>, its direction controls shown (module docstring); "" for None."""
    text = "" if value is None else str(value)
    if DIRECTION_CONTROLS.keys().isdisjoint(text):  # (most names: escaped at once, not character by character)
        return mark_safe("<bdi>" + escape(text) + "</bdi>")
    parts = []
    for char in text:
        control = DIRECTION_CONTROLS.get(char)
        if control is None:
            parts.append(escape(char))
            continue
        short, meaning = control
        code = f"{ord(char):04X}"
        parts.append(format_html('<abbr class="bidi-control" title="U+{} {}">[{}]</abbr>', code, meaning, short))
    return mark_safe("<bdi>" + "".join(parts) + "</bdi>")  # (each part escaped or built above)
