//! `DraftInput`: the message being composed, with a cursor counted in
//! grapheme clusters (what a user sees as one character: an emoji with its
//! modifiers, a letter with combining accents), so editing never splits one.

use unicode_segmentation::UnicodeSegmentation;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraftInput {
    text: String,
    /// Grapheme index, `0..=grapheme_count`.
    cursor: usize,
}

impl DraftInput {
    pub fn new(text: &str) -> Self {
        let mut d = Self { text: text.to_string(), cursor: 0 };
        d.move_cursor_end();
        d
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    #[cfg(test)]
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }

    fn len(&self) -> usize {
        self.text.graphemes(true).count()
    }

    /// Byte offset of grapheme `index` (the end for `index == len`).
    fn byte_index_at(&self, index: usize) -> usize {
        self.text.grapheme_indices(true).nth(index).map(|(i, _)| i).unwrap_or(self.text.len())
    }

    /// Byte offset of the cursor.
    pub fn cursor_byte(&self) -> usize {
        self.byte_index_at(self.cursor)
    }

    pub fn enter_char(&mut self, c: char) {
        let at = self.cursor_byte();
        let before = self.len();
        self.text.insert(at, c);
        // A combining mark joins the grapheme before it: the count may not
        // grow, and the cursor stays after the combined character.
        self.cursor += self.len().saturating_sub(before);
    }

    /// Inserts a whole string (a paste), keeping its newlines.
    pub fn insert_str(&mut self, s: &str) {
        let at = self.cursor_byte();
        let before = self.len();
        // Terminals send CR for newlines in pastes.
        let normalized = s.replace("\r\n", "\n").replace('\r', "\n");
        self.text.insert_str(at, &normalized);
        self.cursor += self.len().saturating_sub(before);
    }

    /// Backspace: removes the grapheme before the cursor.
    pub fn delete_char(&mut self) {
        if self.cursor == 0 {
            return;
        }
        let start = self.byte_index_at(self.cursor - 1);
        let end = self.cursor_byte();
        self.text.replace_range(start..end, "");
        self.cursor -= 1;
    }

    /// Delete: removes the grapheme under the cursor.
    pub fn delete_char_forward(&mut self) {
        if self.cursor >= self.len() {
            return;
        }
        let start = self.cursor_byte();
        let end = self.byte_index_at(self.cursor + 1);
        self.text.replace_range(start..end, "");
    }

    /// Ctrl+W: removes the word before the cursor and the spaces after it.
    pub fn delete_word_backwards(&mut self) {
        let graphemes: Vec<&str> = self.text.graphemes(true).collect();
        let mut i = self.cursor;
        while i > 0 && graphemes[i - 1].chars().all(char::is_whitespace) {
            i -= 1;
        }
        while i > 0 && !graphemes[i - 1].chars().all(char::is_whitespace) {
            i -= 1;
        }
        let start = self.byte_index_at(i);
        let end = self.cursor_byte();
        self.text.replace_range(start..end, "");
        self.cursor = i;
    }

    pub fn move_cursor_left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn move_cursor_right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.len());
    }

    /// Home.
    pub fn reset_cursor(&mut self) {
        self.cursor = 0;
    }

    /// End.
    pub fn move_cursor_end(&mut self) {
        self.cursor = self.len();
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
    }

    /// Takes the text out, leaving the draft empty.
    pub fn take(&mut self) -> String {
        self.cursor = 0;
        std::mem::take(&mut self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(s: &str) -> DraftInput {
        let mut d = DraftInput::default();
        for c in s.chars() {
            d.enter_char(c);
        }
        d
    }

    #[test]
    fn an_emoji_with_modifiers_is_one_step_and_one_backspace() {
        // Woman technologist, medium skin tone: five code points, one grapheme.
        let mut d = typed("hi 👩🏽‍💻!");
        assert_eq!(d.cursor(), 5);
        d.move_cursor_left();
        d.move_cursor_left();
        assert_eq!(d.cursor(), 3);
        d.delete_char_forward();
        assert_eq!(d.text(), "hi !");
        let mut d = typed("a👍🏿");
        d.delete_char();
        assert_eq!(d.text(), "a");
    }

    #[test]
    fn a_combining_mark_joins_the_letter_before_it() {
        let mut d = typed("cafe\u{301}");
        assert_eq!(d.cursor(), 4, "é typed as e + combining acute is one character");
        d.delete_char();
        assert_eq!(d.text(), "caf");
    }

    #[test]
    fn ctrl_w_deletes_the_previous_word_and_its_trailing_spaces() {
        let mut d = typed("git commit  -m");
        d.delete_word_backwards();
        assert_eq!(d.text(), "git commit  ");
        d.delete_word_backwards();
        assert_eq!(d.text(), "git ");
        d.reset_cursor();
        d.delete_word_backwards();
        assert_eq!(d.text(), "git ", "nothing before the cursor");
        d.move_cursor_end();
        d.delete_word_backwards();
        d.delete_word_backwards();
        assert_eq!((d.text(), d.cursor()), ("", 0));
    }

    #[test]
    fn typing_in_the_middle_home_end_and_paste() {
        let mut d = typed("ac");
        d.move_cursor_left();
        d.enter_char('b');
        assert_eq!((d.text(), d.cursor()), ("abc", 2));
        d.reset_cursor();
        d.enter_char('>');
        d.move_cursor_end();
        d.insert_str("\r\nline two\r\n");
        assert_eq!(d.text(), ">abc\nline two\n");
        assert_eq!(d.cursor(), 14);
        assert_eq!(d.take(), ">abc\nline two\n");
        assert!(d.is_blank());
        d.move_cursor_left();
        d.delete_char();
        assert_eq!(d.cursor(), 0, "editing an empty draft is harmless");
    }
}
