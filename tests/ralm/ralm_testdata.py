"""Shared test text, documents and settings for the RALM tests."""
from ralm.settings import RunSettings, settings_from_defaults


def run_settings(seed: int = 0, batch_size: int = 8, **values) -> RunSettings:
    """A run's settings for the engine tests: ralm/conf/ralm/base.yaml's `ralm` node with `values`
    over it (a model without BOS, so window_bos=auto is false)."""
    return settings_from_defaults(values, seed=seed, batch_size=batch_size, model_adds_bos=False)

TEXT = (
    "The Amazon River in South America is the largest river by discharge volume of water in "
    "the world, and the disputed longest river system in the world in comparison to the Nile. "
    "The headwaters of the Apurimac River on Nevado Mismi had been considered for nearly a "
    "century as the Amazon basin's most distant source, until a 2014 study found it to be the "
    "headwaters of the Mantaro River on the Cordillera Rumi Cruz in Peru. The Mantaro and "
    "Apurimac rivers join, and with other tributaries form the Ucayali River, which in turn "
    "meets the Maranon River upstream of Iquitos, Peru, forming what countries other than "
    "Brazil consider to be the main stem of the Amazon. Brazilians call this section the "
    "Solimoes River above its confluence with the Rio Negro, forming what Brazilians call the "
    "Amazon at the Meeting of Waters at Manaus, the largest city on the river. The river "
    "system originates in the Andes and drains into the Atlantic Ocean near the city of Belem."
)

DOCS = [
    {"id": "d0", "title": "Nile", "score": 9.0,
     "text": "The Nile is a major north-flowing river in northeastern Africa. It flows into "
             "the Mediterranean Sea."},
    {"id": "d1", "title": "Amazon River", "score": 8.0,
     "text": "The Amazon River in South America is the largest river by discharge volume of "
             "water in the world. Its source is in the Andes of Peru."},
    {"id": "d2", "title": "Manaus", "score": 7.0,
     "text": "Manaus is the capital and largest city of the Brazilian state of Amazonas, at the "
             "confluence of the Negro and Solimoes rivers."},
]
