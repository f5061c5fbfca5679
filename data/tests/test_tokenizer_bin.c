/*
Reads gpt2_tokenizer.bin through llmc/tokenizer.h, as the trainers do, for data/tests/run.sh.

    test_tokenizer_bin FILE info     init_ok, vocab_size, eot_token and the eot token's text
    test_tokenizer_bin FILE decode   token ids on stdin (one per line) -> their bytes on stdout
    test_tokenizer_bin FILE print    token ids on stdin -> safe_printf of each
*/
#include "tokenizer.h"

int main(int argc, char** argv) {
    if (argc != 3) { fatal("usage: test_tokenizer_bin FILE info|decode|print"); }
    Tokenizer t;
    tokenizer_init(&t, argv[1]);
    if (strcmp(argv[2], "info") == 0) {
        const char* eot = tokenizer_decode(&t, t.init_ok ? (uint32_t)t.eot_token : 0);
        printf("init_ok=%d vocab_size=%u eot_token=%d eot_text=%s\n", t.init_ok, t.vocab_size, t.eot_token, eot ? eot : "(null)");
    } else {
        if (!t.init_ok) { fatal("no tokenizer file"); }
        int print = strcmp(argv[2], "print") == 0;
        unsigned long id;
        while (scanf("%lu", &id) == 1) {
            const char* piece = tokenizer_decode(&t, (uint32_t)(id > UINT32_MAX ? UINT32_MAX : id));
            if (print) { safe_printf(piece); }
            else if (piece[0] == '\0') { fputc('\0', stdout); }  // the token of byte 0
            else { fputs(piece, stdout); }
        }
    }
    tokenizer_free(&t);
    return 0;
}
