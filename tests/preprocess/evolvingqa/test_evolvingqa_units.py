"""EvolvingQA's pure pieces: revisions, passages, prompts and their replies, filters, templates,
the QA CSV writer."""

import csv

import pytest

from tw_jax.preprocess.evolvingqa import filters, layout, prompts
from tw_jax.preprocess.evolvingqa.passages import passages, revisions, without_sentences
from tw_jax.preprocess.evolvingqa.qa_csv import QA, dedupe, split_unchanged, write_qa_sets
from tw_jax.preprocess.evolvingqa.questions import DERIVED, QUESTIONS, WRITTEN, question
from tw_jax.preprocess.facts.relation_templates import TEMPLATES

OLD = [
    "Alaska is a state. If it was an independent nation it would be the 16th largest country "
    "in the world, larger than Iran.",
    "Juneau is the capital.",
    "The state has many glaciers.",
]
NEW = [
    "Alaska is a state. If it was an independent nation it would be the 17th largest country "
    "in the world, larger than Iran. It joined the union in 1959.",
    "Juneau is the capital.",
    "Fishing is a major industry of the state and employs many.",
    "The state has many glaciers and fjords.",
]


def test_revisions_pair_each_revised_run_of_sentences_with_its_old_version():
    found = revisions(OLD, NEW)
    assert [(r.paragraph, r.block, r.old_text, r.new_text) for r in found] == [
        (0, 0, OLD[0].split(". ", 1)[1], NEW[0].split(". ", 1)[1]),
        (3, 0, "The state has many glaciers.", "The state has many glaciers and fjords."),
    ]
    # The inserted paragraph 2 is an addition (New), not a revision.
    assert found[0].old_paragraph == OLD[0] and found[0].new_paragraph == NEW[0]
    assert found[0].new_sentences == [
        "If it was an independent nation it would be the 17th largest country in the world, "
        "larger than Iran.", "It joined the union in 1959."]


def test_a_moved_sentence_is_no_revision_and_dissimilar_paragraphs_are_not_paired():
    assert revisions(["Cats purr loudly. Dogs bark."], ["Dogs bark. Cats purr loudly."]) == []
    assert revisions(["One two three four."], ["Completely different words here now."]) == []


def test_without_sentences_and_passages():
    text = "First one. Second one.\nThird one."
    assert without_sentences(text, {"Second one."}) == "First one.\nThird one."
    assert without_sentences(text, {"Third one."}) == "First one. Second one."
    assert passages("A b c. D e f. G h i.", 6) == ["A b c. D e f.", "G h i."]


def test_layout_months_and_pairs():
    assert layout.month_of_dump("x/enwiki-20230201-pages-articles.xml.bz2") == "2023-02"
    assert layout.month_name("2023-03") == "March 2023"
    assert layout.pairs_of(["2021-08", "2021-09", "2021-10"]) == [
        ("2021-08", "2021-09", "0809"), ("2021-09", "2021-10", "0910")]
    with pytest.raises(layout.LayoutError, match="increase"):
        layout.pairs_of(["2021-09", "2021-08"])
    with pytest.raises(layout.LayoutError, match="--months"):
        layout.month_of_dump("dump.xml")


def test_edited_prompt_is_the_papers():
    messages = prompts.edited_messages("Azerbaijan", "February 2023", "March 2023",
                                       "It ranks 88th.", "It ranks 91st.", ["88th"], ["91st"])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0]["content"].startswith(
        "You are a helpful assistant and will be provided with two documents that are parts of "
        "Wikipedia articles of the same topic but written in February 2023 and March 2023.")
    assert "the answer for February and the answer for March are different" in messages[0][
        "content"]
    assert messages[2]["content"] == (
        "Question: What is the ranking of Alaska if it was an independent nation?\n"
        "Answer1: 16th\nAnswer2: 17th")
    assert messages[3]["content"] == (
        "Document of \"Azerbaijan\" in February 2023: 'It ranks 88th.'\n"
        "Entities from \"Azerbaijan\" in February 2023: [88th].\n"
        "Document of \"Azerbaijan\" in March 2023: 'It ranks 91st.'\n"
        "Entities from \"Azerbaijan\" in March 2023: [91st].")
    check = prompts.equivalence_messages("28", "Twenty-Eight")[0]["content"]
    assert check == ("Are '28' and 'Twenty-Eight' semantically equivalent or meaning the same?\n"
                     "Options:\n(A) True\n(B) False\nAnswer:")
    verify = prompts.verification_messages("Commuter rail", "ctx", "Which?", "X")[0]["content"]
    assert verify.endswith("Given the context, is the proposed answer:\n(A) True\n(B) False\n"
                           "The proposed answer is:")


def test_replies_are_parsed_and_filtered():
    two = prompts.parse_reply("Question: Who?\nAnswer1: 'Kulric'\nAnswer2: Naunsberg",
                              two_answers=True)
    assert two == prompts.Generated("Who?", "Kulric", "Naunsberg")
    assert prompts.parse_reply("Question: Who?\nAnswer: ", two_answers=False) is None
    assert prompts.parse_reply("question: Who?\nanswer: X", two_answers=False).answer == "X"
    assert prompts.says_no_factual_update("No factual\nupdate.")
    assert [prompts.parse_choice(r) for r in ("(A) True", "B", "False.", "maybe")] == [
        "A", "B", "B", None]
    assert filters.in_passage("the Hons Ground", "Opened in 1952, the Hons Ground was renovated")
    assert not filters.in_passage("Hons", "the Honsberg Ground")
    assert filters.same_answer("The 17th.", "17th")
    assert filters.hallucination_verdict("B") == filters.LLM_HALLUCINATION
    assert filters.equivalence_verdict("A") == filters.LLM_EQUIVALENT
    assert filters.equivalence_verdict(None) == filters.UNCLEAR_VERDICT


def test_question_templates_cover_the_relation_table():
    assert set(QUESTIONS) <= set(TEMPLATES)
    assert question("Trurmouth", "head of government") == (
        "Who is the head of government of Trurmouth?", WRITTEN)
    assert question("X", "population", "P1082")[0] == "What is the population of X?"
    assert question("X", "image") == ("What is the image of X?", DERIVED)
    assert all(q.endswith("?") and q.count("[X]") == 1 for q in QUESTIONS.values())


def test_qa_sets_are_deduplicated_split_and_written(tmp_path):
    rows = [QA(f"Q{i}?", f"A{i}") for i in range(10)] + [QA("Q0?", "A0"), QA("Q1?", "other")]
    kept, ambiguous = dedupe(rows)
    assert ambiguous == 1 and [r.question for r in kept] == [f"Q{i}?" for i in range(10) if i != 1]
    train, evaluation = split_unchanged(kept, 0.62, seed=0)
    assert len(train) == 6 and len(evaluation) == 3 and not {*train} & {*evaluation}
    assert split_unchanged(kept, 0.62, seed=0) == (train, evaluation)
    summary = write_qa_sets(tmp_path, rows, {"0809": [QA("N?", "n")]},
                            {"0809": [QA("E?", "old", "new")]})
    assert summary["sets"]["unchanged"] == {"train": 6, "eval": 3, "ambiguous": 1}
    with open(tmp_path / "edited_0809.csv", newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == [["question", "answer1", "answer2"],
                                            ["E?", "old", "new"]]
    with open(tmp_path / "new_0809.csv", newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == [["question", "answer"], ["N?", "n"]]
    assert (tmp_path / "generate.json").exists()
