/*
The defaults of the encoding's hooks that both trainers declare alike (after the encoding's
CPU or CUDA part, which may define them; docs/adding-an-encoding.md): an encoding's own
state across passes, model->pe_state (floater's solutions of its ODE), and a range of lengths
that depends on the parameters.
  pe_after_update    after every update (floater: its training positions one update older): PE_AFTER_UPDATE
  pe_resume_bytes, pe_resume_save, pe_resume_load
                     its state in the training state file, for an exact resume (llmc/driver.h): PE_RESUME
  pe_free            frees model->pe_state: PE_FREE
  pe_reach           whether T tokens are within the range (gpt2_reaches): PE_REACH
No include guard: included once by each trainer.
*/
#ifndef PE_AFTER_UPDATE
static void pe_after_update(GPT2* model) {}
#endif
#ifndef PE_RESUME
static size_t pe_resume_bytes(const GPT2* model) { return 0; }
static void pe_resume_save(const GPT2* model, void* out) {}
static void pe_resume_load(GPT2* model, const void* in) {}
#endif
#ifndef PE_FREE
static void pe_free(GPT2* model) {}
#endif
#ifndef PE_REACH
static int pe_reach(GPT2* model, int T) { return 1; }
#endif
